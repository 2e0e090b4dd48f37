"""Scenario models and the YAML loader.

Each area below the scenario keeps its own section's models beside its code
(load/load_config.py, targets/specs.py, samplers/selection.py, sinks/destinations.py,
analysis/scenario_sections.py); scenario.py composes them into a Scenario. The `bench:`
section lives here (bench.py), since bench itself runs scenarios. loading.py
reads YAML and turns validation errors into lines that name the YAML path.
"""

from soak.analysis.scenario_sections import CriteriaConfig, LeaksConfig
from soak.config.bench import BenchConfig, BenchCriteria, KneeConfig
from soak.config.loading import (
    InvalidModel,
    error_lines,
    is_upgrade_plan,
    load_scenario,
    parse_yaml,
    read_yaml,
    scenario_from_data,
    set_path,
    validate_model,
)
from soak.config.scenario import AlertingConfig, LimitsConfig, Phase, Scenario, SetupCall
from soak.errors import not_utf8

__all__ = [
    "AlertingConfig",
    "BenchConfig",
    "BenchCriteria",
    "CriteriaConfig",
    "InvalidModel",
    "KneeConfig",
    "LeaksConfig",
    "LimitsConfig",
    "Phase",
    "Scenario",
    "SetupCall",
    "error_lines",
    "is_upgrade_plan",
    "load_scenario",
    "not_utf8",
    "parse_yaml",
    "read_yaml",
    "scenario_from_data",
    "set_path",
    "validate_model",
]
