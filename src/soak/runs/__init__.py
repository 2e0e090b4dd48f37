"""soak.runs: a runs life and its files: the data directorys layout, the run record
and timeline, the Run, its status and its end."""
