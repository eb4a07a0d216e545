"""The runtime under test: pure state machines (no I/O, no clock), per rank.

`graph_state` models one request in one worker graph; `rank` models one worker's requests and
its routing; `profiles` are the shipped mstar semantics; `registry` finds runtimes by name.
"""
