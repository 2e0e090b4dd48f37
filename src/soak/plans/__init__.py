"""soak.plans: what happens when, in a soak, a bench, an upgrade, a standalone load and
a replay.

Each plan is a small module that orders the steps; none starts a target or opens a sink
itself: the run engine (soak.runs) does, and the domain (soak.bench, soak.upgrade) says
how a step is done and judged. Every plan has one shape and is registered by name with
the one engine that runs it, its teardown and its signals (soak.plans.engine).
"""
