"""Reports: the summary JSON of DESIGN section 6, console tables, trace files."""
