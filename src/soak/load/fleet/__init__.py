"""A load from agents on an engine (soak.agents): what they are started with, the
coordinator's bookkeeping of their seconds, a soak run's load and `soak load`'s."""
