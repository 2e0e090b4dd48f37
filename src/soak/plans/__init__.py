"""soak.plans: what happens when, in a soak, a bench, an upgrade and a standalone load.

Each plan is a small module that orders the steps; none starts a target or opens a sink
itself: the run engine (soak.runs) does, and the domain (soak.bench, soak.upgrade) says
how a step is done and judged.
"""
