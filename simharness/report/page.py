"""The page kit: one self-contained HTML page, pictures inlined, no network.

Every command's page (the run page in `simharness.report.html`, the others in their command's
module under `simharness.commands`) is built from these pieces, so all of them look alike.
Every value that comes from a run goes through `html.escape`; the pictures are PNG bytes from
`simharness.report.plots`, inlined as SVG.
"""

from __future__ import annotations

from html import escape

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em auto;max-width:1200px;
color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;border-bottom:1px solid #ddd;
padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ddd;padding:2px 8px;
text-align:right} th{background:#f4f4f4} td.l,th.l{text-align:left}
td.extra{background:#f8c9c9;color:#8b0000;font-weight:bold} td.missing{background:#fde7a8;
font-weight:bold} .pass{color:#137333;font-weight:bold} .fail{color:#b3261e;font-weight:bold}
.violation{border-left:4px solid #b3261e;padding:.3em .8em;margin:.6em 0;background:#fff6f6}
code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace} pre{background:#f7f7f7;
padding:.6em;overflow-x:auto} img{max-width:100%} figure.plot{margin:0}
figure.plot svg{max-width:100%;height:auto} .caption{color:#555;font-size:.9em}
dl.params{display:grid;grid-template-columns:max-content auto;gap:2px 12px} dt{font-weight:bold}
dd{margin:0;font-family:ui-monospace,monospace;font-size:12px}
"""


def img(svg: str, alt: str, ident: str) -> str:
    """A picture inlined as SVG (`plots`), in a figure named `ident`, described by `alt`."""
    body = svg[svg.index("<svg"):]  # the XML prolog and doctype cannot stand inside HTML
    return f'<figure id="{ident}" class="plot" role="img" aria-label="{escape(alt)}">{body}</figure>'


def page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n")


def outcome(verdict: str) -> str:
    """A verdict (``pass``, ``fail``, ``hang``, ...) in capitals, green for a pass, red otherwise."""
    cls = "pass" if verdict == "pass" else "fail"
    return f'<span class="{cls}" id="outcome">{escape(verdict.upper())}</span>'


def console(text: str) -> str:
    """The console section: what the command printed, word for word."""
    return f'<section id="console"><h2>Console output</h2><pre>{escape(text)}</pre></section>'
