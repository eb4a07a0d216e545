"""The simpy driver: conductor, ranks, micro-scheduler, links, random streams, trace events.

The engine carries out what the runtime under test decides; it holds no routing policy of its
own, and it never imports the checks (they observe the events it emits).
"""
