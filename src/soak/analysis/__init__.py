"""soak.analysis: leak verdicts and pass/fail criteria, pure functions over plain series."""

from soak.analysis.criteria import CriterionResult, evaluate_criteria, failed
from soak.analysis.leaks import LeakVerdict, leak_points, leak_verdict
from soak.analysis.rundata import ClassSeries, RunData, run_data_from_store

__all__ = [
    "ClassSeries",
    "CriterionResult",
    "LeakVerdict",
    "RunData",
    "evaluate_criteria",
    "failed",
    "leak_points",
    "leak_verdict",
    "run_data_from_store",
]
