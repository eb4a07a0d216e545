"""The graph IR (node, sequential, parallel, loop) and the facts derived from it."""
