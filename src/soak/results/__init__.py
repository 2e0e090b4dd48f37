"""soak.results: what a run comes to, above the run engine (soak.runs) and the report
(soak.report): its judging at the end (judge), its report's input (reportinput), its
status (status), its leak alerts (alerts) and what grew (grew). It hears the run through
the hooks the run offers (runs.ending's end hook, runs.listening's listener); the run
never imports it."""
