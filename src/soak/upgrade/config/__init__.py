"""The upgrade plan: old and new versions, data, populate, snapshot, migrate, checks.

models.py holds the plan's sections, checks.py its checks (the kinds are imported
from there), loading.py reads a plan from disk and checks what the models cannot
see (names that refer to other parts, files the plan names). The plan, its sections,
the Check union and the loaders are re-exported here.
"""

from soak.upgrade.config.checks import Check
from soak.upgrade.config.loading import load_matrix, load_plan, matrix_name
from soak.upgrade.config.models import (
    ApiSnapshot,
    ApiStep,
    CommandStep,
    CorpusSnapshot,
    DataSpec,
    DigSnapshot,
    DnsQuerySpec,
    DnsStep,
    Matrix,
    Migrate,
    MigrateContainer,
    PopulateStep,
    Rollback,
    ServerVersion,
    SnapshotItem,
    SwapLoad,
    UpgradePlan,
    WaitStep,
)

__all__ = [
    "ApiSnapshot",
    "ApiStep",
    "Check",
    "CommandStep",
    "CorpusSnapshot",
    "DataSpec",
    "DigSnapshot",
    "DnsQuerySpec",
    "DnsStep",
    "Matrix",
    "Migrate",
    "MigrateContainer",
    "PopulateStep",
    "Rollback",
    "ServerVersion",
    "SnapshotItem",
    "SwapLoad",
    "UpgradePlan",
    "WaitStep",
    "load_matrix",
    "load_plan",
    "matrix_name",
]
