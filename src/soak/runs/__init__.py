"""soak.runs: a run's life and its files: the data directory's layout, the run record
and timeline, the Run, its end, and the hooks through which the layers above hear it
(runs.ending's end hook, runs.listening's listener); it never imports them."""
