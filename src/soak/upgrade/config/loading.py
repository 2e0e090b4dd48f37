"""Reading a plan: `load_plan` reads the YAML, expands `include:` checklists (each
validated against its own file, so an error names that file), validates every
section, then cross-checks what pydantic cannot see: `needs:` and `snapshot:`
names, `{{name}}` references, and on disk the corpus files and the archive.
Every problem is an InputError (exit 2) before anything starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from soak.config import read_yaml, set_path, validate_model
from soak.config.loading import InvalidModel, override_value
from soak.errors import InputError
from soak.upgrade.config.checks import (
    TEMPLATED_EXPECT_FIELDS,
    TEMPLATED_FIELDS,
    Check,
    Checklist,
    CorpusCheck,
    SwapCheck,
    UnchangedCheck,
)
from soak.upgrade.config.models import CorpusSnapshot, UpgradePlan
from soak.upgrade.template import referenced_names


def _expand_checks(raw: Any, base_dir: Path, source: str) -> list[Any]:
    """Inline checks stay raw; `- include: checks/x.yaml` becomes that file's checks,
    validated against that file so that errors name it."""
    if not isinstance(raw, list):
        raise InputError(f"{source}: checks: a list of checks (or `- include: FILE`)")
    out: list[Any] = []
    for index, entry in enumerate(raw):
        if isinstance(entry, dict) and "include" in entry:
            if set(entry) != {"include"}:
                raise InputError(f"{source}: checks.{index}: `include` stands alone")
            path = Path(str(entry["include"]))
            path = path if path.is_absolute() else base_dir / path
            if not path.is_file():
                raise InputError(f"{source}: checks.{index}: checklist file {path} not found")
            data = read_yaml(path)
            if isinstance(data, list):
                data = {"checks": data}
            out.extend(validate_model(Checklist, data, str(path)).checks)
        else:
            out.append(entry)
    return out


def _checklist_problems(plan: UpgradePlan, checks: list[Check], where: str) -> list[str]:
    """Names within one checklist (`checks` or `rollback.checks`)."""
    problems: list[str] = []
    names = [c.name for c in checks]
    seen: set[str] = set()
    for i, check in enumerate(checks):
        if check.name in seen:
            problems.append(f"{where}.{i}.name: duplicate check name {check.name!r}")
        seen.add(check.name)
        for need in check.needs:
            if need not in names:
                problems.append(f"{where}.{i}.needs: {need!r} names no check")
            elif names.index(need) >= i:
                problems.append(f"{where}.{i}.needs: {need!r} does not come before {check.name!r}")
    snapshots = [s.name for s in plan.snapshot]
    corpora = [s.name for s in plan.snapshot if isinstance(s, CorpusSnapshot)]
    for i, check in enumerate(checks):
        if isinstance(check, UnchangedCheck) and check.snapshot not in snapshots:
            problems.append(f"{where}.{i}.snapshot: {check.snapshot!r} names no snapshot item")
        elif isinstance(check, UnchangedCheck) and check.snapshot in corpora:
            problems.append(f"{where}.{i}.snapshot: {check.snapshot!r} is a corpus: `kind: corpus`")
        if isinstance(check, CorpusCheck) and check.snapshot not in corpora:
            problems.append(f"{where}.{i}.snapshot: {check.snapshot!r} names no corpus item")
    return problems


def _template_problems(checks: list[Check], where: str) -> list[str]:
    """`{{name}}` where a check would use it as written (its name, `needs:`, a port, a
    JSON path): it is filled into requests and expected values only."""
    problems: list[str] = []
    for i, check in enumerate(checks):
        allowed = TEMPLATED_FIELDS.get(check.kind, frozenset())
        fields = ", ".join(sorted(allowed)) or "none of its fields"
        for field, value in check.model_dump(mode="json", by_alias=True).items():
            places = [(f"{where}.{i}.{field}", value)]
            if field == "expect" and field in allowed:  # the values, not the paths
                places = [
                    (f"{where}.{i}.expect.{j}.{key}", sub)
                    for j, item in enumerate(value)
                    for key, sub in item.items()
                    if key not in TEMPLATED_EXPECT_FIELDS
                ]
            elif field in allowed:
                continue
            for place, sub in places:
                for name in sorted(referenced_names(sub)):
                    problems.append(
                        f"{place}: {{{{{name}}}}} is not filled in here (a {check.kind} check "
                        f"fills {{{{name}}}} into: {fields})"
                    )
    return problems


def _cross_check(plan: UpgradePlan, env: dict[str, str]) -> list[str]:
    """What one field's validator cannot see: names that refer to other parts."""
    problems = _checklist_problems(plan, plan.checks, "checks")
    problems += _template_problems(plan.checks, "checks")
    snapshots = [s.name for s in plan.snapshot]
    if len(set(snapshots)) != len(snapshots):
        problems.append("snapshot: item names must be unique")
    if plan.rollback is not None:
        problems += _checklist_problems(plan, plan.rollback.checks, "rollback.checks")
        problems += _template_problems(plan.rollback.checks, "rollback.checks")
        for i, check in enumerate(plan.rollback.checks):
            if isinstance(check, SwapCheck):
                problems.append(f"rollback.checks.{i}: no load runs through a rollback")
        if plan.rollback.migrate and plan.rollback.migrate.container and not plan.uses_docker:
            problems.append("rollback.migrate.container: a one-shot container needs docker targets")
    for i, item in enumerate(plan.snapshot):
        if isinstance(item, CorpusSnapshot) and not plan.resolve_path(item.file).is_file():
            problems.append(f"snapshot.{i}.file: {plan.resolve_path(item.file)} not found")
    for i, check in enumerate(plan.checks):
        if isinstance(check, SwapCheck) and plan.load is None:
            problems.append(f"checks.{i}: a swap check needs the plan's `load:`")
    if plan.load is not None:
        for side in ("old", "new"):
            if plan.load.port not in getattr(plan, side).ports:
                problems.append(f"load.port: {side} has no port named {plan.load.port!r}")
    for side in ("old", "new"):
        if getattr(plan, side).runtime == "external":
            problems.append(f"{side}.runtime: an upgrade starts and stops it; external is not")
        if getattr(plan, side).runtime == "docker" and getattr(plan, side).volume is None:
            problems.append(f"{side}.volume: a docker version needs `volume: {{mount: PATH}}`")
        if getattr(getattr(plan, side), "data_dir", None):
            problems.append(f"{side}.data_dir: the plan's `data:` decides the data directory")
    if plan.data.archive:
        problems += _archive_problems(plan.resolve_path(plan.data.archive))
    if plan.data.owner and plan.old.runtime != "docker":
        problems.append("data.owner: an old docker version only (its image names the owner)")
    if plan.data.volume and plan.data_on_host:
        problems.append("data.volume: a named volume needs docker versions only")
    if plan.migrate and plan.migrate.container and not plan.uses_docker:
        problems.append("migrate.container: a one-shot container needs docker targets")
    known = set(plan.vars) | plan.saved_names()
    for name in sorted(referenced_names(plan.model_dump(mode="json", by_alias=True))):
        if name.startswith("env."):
            if name[4:] not in env:
                problems.append(f"{{{{{name}}}}}: environment variable {name[4:]} is not set")
        elif name not in known and name not in env:
            problems.append(f"{{{{{name}}}}}: not a var, a saved value or an environment variable")
    return problems


def _archive_problems(path: Path) -> list[str]:
    """The whole archive read before anything starts: a truncated or foreign file is
    found here, not after the old version's data directory was made."""
    import tarfile

    if not path.is_file():
        return [f"data.archive: {path} not found"]
    try:
        with tarfile.open(path) as tar:
            tar.getmembers()  # reads to the end: a truncated archive fails here
    except (tarfile.TarError, OSError, EOFError) as exc:
        return [f"data.archive: {path} is not a readable tar archive ({exc})"]
    return []


def matrix_name(plan_name: str, label: str) -> str:
    return f"{plan_name}[old {label}]"


def _apply_matrix_entry(data: dict[str, Any], label: str, path: Path) -> None:
    """The entry's values set into the plan; the plan is named after the pair."""
    entries = (data.get("matrix") or {}).get("old") or {}
    if label not in entries:
        known = ", ".join(map(str, entries)) or "none: the plan has no matrix"
        raise InputError(f"--old {label}: no such matrix entry in {path} (entries: {known})")
    values = entries[label]
    if not isinstance(values, dict):
        raise InputError(f"{path}: matrix.old.{label}: a mapping of key.path: value")
    for key, value in values.items():
        try:
            set_path(data, str(key), value)
        except (IndexError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"{path}: matrix.old.{label}.{key}: no such place ({exc})") from exc
    data["name"] = matrix_name(str(data.get("name", "")), label)


def _apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, str]:
    """`--set key.path=value` items set into `data`, each value read as YAML; the ones
    YAML read as a number or a boolean, by key, with their text as given."""
    as_text: dict[str, str] = {}
    for item in overrides:
        key, sep, raw_value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set takes key.path=value, got {item!r}")
        value = override_value(raw_value)
        try:
            set_path(data, key, value)
        except (IndexError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"--set {item!r}: no such place in the plan ({exc})") from exc
        if isinstance(value, int | float | bool):
            as_text[key] = raw_value
    return as_text


def _names_place(key: str, loc: tuple[Any, ...]) -> bool:
    """Whether a validation error at `loc` is at `--set` key `key` (a union's tag, such
    as `docker` in `new.docker.version`, may stand between its parts)."""
    parts = key.split(".")
    if not loc or str(loc[-1]) != parts[-1]:
        return False
    rest = iter(str(p) for p in loc)
    return all(any(p == part for p in rest) for part in parts)


def _validate_with_text(data: dict[str, Any], where: str, as_text: dict[str, str]) -> UpgradePlan:
    """The plan validated; a `--set` value that YAML read as a number where the field
    takes a string (`--set new.version=1.26`) is the text as written, not `1.26` made a
    float (nor `1.10` made `1.1`)."""
    try:
        return validate_model(UpgradePlan, data, where)
    except InvalidModel as exc:
        errors = exc.__cause__.errors() if isinstance(exc.__cause__, ValidationError) else []
        keys = {
            key
            for key in as_text
            for err in errors
            if err["type"] == "string_type" and _names_place(key, err["loc"])
        }
        if not keys:
            raise
    for key in keys:
        set_path(data, key, as_text[key])
    return validate_model(UpgradePlan, data, where)


def load_plan(
    path: Path,
    overrides: Sequence[str] = (),
    env: dict[str, str] | None = None,
    *,
    matrix_entry: str | None = None,
) -> UpgradePlan:
    """Read and validate a plan; `overrides` are `--set key.path=value` items, applied
    after the values of `matrix_entry` (one old version of the plan's matrix). A plan
    with a matrix is validated with each of its entries too."""
    import os

    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: an upgrade plan is a YAML mapping")
    if matrix_entry is not None:
        _apply_matrix_entry(data, matrix_entry, path)
    as_text = _apply_overrides(data, overrides)
    base_dir = path.resolve().parent
    if "checks" in data:
        data = {**data, "checks": _expand_checks(data["checks"], base_dir, str(path))}
    rollback = data.get("rollback")
    if isinstance(rollback, dict) and "checks" in rollback:
        checks = _expand_checks(rollback["checks"], base_dir, f"{path}: rollback")
        data = {**data, "rollback": {**rollback, "checks": checks}}
    where = f"{path} (matrix entry {matrix_entry})" if matrix_entry else str(path)
    plan = _validate_with_text(data, where, as_text)
    plan._base_dir = base_dir
    plan._source = str(path)
    problems = _cross_check(plan, dict(os.environ) if env is None else env)
    if problems:
        raise InputError(f"{where}: " + f"\n{where}: ".join(problems))
    if matrix_entry is None and plan.matrix is not None:
        entry_problems = []  # every entry checked, each named, not only the first bad one
        for label in plan.matrix.old:
            try:
                load_plan(path, overrides, env, matrix_entry=label)
            except InputError as exc:
                entry_problems.append(str(exc))
        if entry_problems:
            raise InputError("\n".join(entry_problems))
    return plan


def load_matrix(
    path: Path,
    overrides: Sequence[str] = (),
    olds: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> list[UpgradePlan]:
    """The plans to run: one per selected matrix entry (`olds`; none: every entry), or
    the plan itself when it has no matrix (then `olds` must be empty)."""
    plan = load_plan(path, overrides, env)
    if plan.matrix is None:
        if olds:
            raise InputError(f"--old {olds[0]}: {path} has no `matrix:`")
        return [plan]
    labels = list(olds) or list(plan.matrix.old)
    return [load_plan(path, overrides, env, matrix_entry=label) for label in labels]
