"""The upgrade plan: old and new versions, data, populate, snapshot, migrate, checks.

`load_plan` reads the YAML, expands `include:` checklists (each validated
against its own file, so an error names that file), validates every section,
then cross-checks what pydantic cannot see: `needs:` and `snapshot:` names,
`{{name}}` references, regexes, the archive file. Every problem is an
InputError (exit 2) before anything starts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, PrivateAttr, field_validator, model_validator

from soak.config import read_yaml, set_path, validate_model
from soak.errors import InputError
from soak.load.config import QueryClass
from soak.sinks.config import SinkConfig
from soak.targets.config import Probe, TargetConfig
from soak.units import DurationS, FileModel, StrictModel
from soak.upgrade import jsonpath
from soak.upgrade.template import referenced_names

# ---------------------------------------------------------------- data


class DataSpec(StrictModel):
    """Where old and new keep their state. Neither field: a fresh, empty one.

    `archive`: a tar (optionally gzip) extracted into a fresh directory (process
    targets) or into a fresh named volume (docker targets); the archive itself is
    only read. `volume`: a docker named volume, used as it is (created if missing).
    """

    archive: str | None = None
    volume: str | None = None
    # docker: chown the extracted archive to this user[:group] of the image (names are
    # resolved inside it); the engine unpacks archives as root, and a server that runs as
    # its own user cannot write root-owned files (the seed's root-owned volume bug).
    owner: str | None = None


# ---------------------------------------------------------------- populate


class DnsQuerySpec(StrictModel):
    name: str
    type: str = "A"


class ApiStep(StrictModel):
    kind: Literal["api"]
    port: str = "api"  # a named port of the target
    method: str = "GET"
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = Field(default=None, alias="json")
    status: int | None = 200  # None: any 2xx
    save: dict[str, str] = Field(default_factory=dict)  # value name -> JSON path
    timeout_s: DurationS = 10.0

    @field_validator("save")
    @classmethod
    def _paths(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value.values():
            jsonpath.parse(path)
        return value


class DnsStep(StrictModel):
    """A list of queries, or `count` queries taken in turn from a file ("name type" lines)."""

    kind: Literal["dns"]
    port: str = "dns"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    queries: list[DnsQuerySpec] = Field(default_factory=list)
    file: str | None = None
    count: int | None = Field(default=None, ge=1)
    rcode: str | None = None  # every reply must have it; None: any reply
    timeout_s: DurationS = 2.0

    @model_validator(mode="after")
    def _source(self) -> DnsStep:
        if bool(self.queries) == bool(self.file):
            raise ValueError("give either `queries` or `file`")
        return self


class CommandStep(StrictModel):
    """Run in the target's environment: `docker exec` for a container, else on the host."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 60.0
    save_stdout: str | None = None  # value name for the stripped standard output


class WaitStep(StrictModel):
    kind: Literal["wait"]
    probe: Probe
    timeout_s: DurationS = 30.0
    interval_s: DurationS = 0.2


PopulateStep = Annotated[ApiStep | DnsStep | CommandStep | WaitStep, Field(discriminator="kind")]

# ---------------------------------------------------------------- snapshot


class ApiSnapshot(StrictModel):
    kind: Literal["api"]
    name: str
    port: str = "api"
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 10.0


class DigSnapshot(StrictModel):
    kind: Literal["dig"]
    name: str
    port: str = "dns"
    qname: str
    type: str = "A"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    timeout_s: DurationS = 2.0


class CorpusSnapshot(StrictModel):
    """Many names asked of the old version; a `corpus` check asks them of the new."""

    kind: Literal["corpus"]
    name: str
    port: str = "dns"
    file: str  # `name [type]` lines, relative to the plan
    count: int | None = Field(default=None, ge=1, le=1_000_000)  # None: every line once
    rate_qps: float = Field(default=1000.0, gt=0, le=50_000)
    parallel: int = Field(default=32, ge=1, le=256)  # queries in flight
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    timeout_s: DurationS = 2.0


SnapshotItem = Annotated[ApiSnapshot | DigSnapshot | CorpusSnapshot, Field(discriminator="kind")]

# ---------------------------------------------------------------- migrate


class MigrateContainer(StrictModel):
    """A one-shot container with the data volume mounted (docker plans)."""

    image: str
    entrypoint: list[str] | None = None  # None: the image's
    command: list[str] = Field(min_length=1)
    mount: str  # where the data volume is mounted inside
    user: str | None = None


class Migrate(StrictModel):
    command: list[str] | None = None  # on the host, placeholders filled
    container: MigrateContainer | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 300.0

    @model_validator(mode="after")
    def _one(self) -> Migrate:
        if (self.command is None) == (self.container is None):
            raise ValueError("give either `command` or `container`")
        return self


# ---------------------------------------------------------------- load during the swap


class SwapLoad(StrictModel):
    """A steady query load on the service address while old stops and new starts.

    It starts after the snapshot, runs through stop old, migrate, start new, and
    stops `settle_s` after the new version is ready. The new version gets the old
    one's host ports (the same published port for docker, the same port for a
    process), so the load never changes its address. One worker: its longest
    silence is the service's longest time without answers.
    """

    port: str = "dns"
    rate_qps: float = Field(default=500.0, gt=0, le=50_000)
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    mix: list[QueryClass] = Field(min_length=1)
    timeout_s: DurationS = 1.0  # a reply later than this counts as lost
    flows: int = Field(default=16, ge=1, le=1024)
    settle_s: DurationS = 2.0
    max_duration_s: DurationS = 600.0  # the load stops by itself after this


# ---------------------------------------------------------------- checks


class CheckBase(StrictModel):
    name: str = Field(min_length=1)
    needs: list[str] = Field(default_factory=list)
    # Keep trying until this deadline (seconds) while the check fails: for checks that
    # wait for the server. None: one attempt.
    retry: DurationS | None = None
    retry_interval_s: DurationS = 0.5

    @field_validator("needs", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class JsonExpect(StrictModel):
    """One JSON-path assertion; `path` selects values (see soak.upgrade.jsonpath)."""

    path: str
    equals: Any = None
    contains: Any = None  # one of the selected values equals it (or a string contains it)
    count: int | None = Field(default=None, ge=0)
    exists: bool | None = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        jsonpath.parse(value)  # ValueError names the problem
        return value

    @model_validator(mode="after")
    def _one(self) -> JsonExpect:
        given = [k for k in ("equals", "contains", "count", "exists") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("give exactly one of equals, contains, count, exists")
        return self


class ApiCheck(CheckBase):
    kind: Literal["api"]
    port: str = "api"
    method: str = "GET"
    path: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = Field(default=None, alias="json")
    status: int | None = 200  # None: any 2xx
    expect: list[JsonExpect] = Field(default_factory=list)
    header: dict[str, str] = Field(default_factory=dict)  # response header contains value
    timeout_s: DurationS = 10.0


class DigCheck(CheckBase):
    kind: Literal["dig"]
    port: str = "dns"
    qname: str
    type: str = "A"
    protocol: Literal["udp", "tcp", "dot", "doh"] = "udp"
    rcode: str | None = "NOERROR"
    answers: list[str] | None = None  # exactly this set of rdata
    contains: list[str] = Field(default_factory=list)  # at least these
    ttl_min: int | None = None
    ttl_max: int | None = None
    flags: list[str] = Field(default_factory=list)  # set in the reply, e.g. [AA]
    timeout_s: DurationS = 2.0


class UnchangedCheck(CheckBase):
    """A snapshot item asked again of the new version and compared."""

    kind: Literal["unchanged"]
    snapshot: str
    ignore: list[str] = Field(default_factory=list)  # JSON keys dropped at any depth


class LogCheck(CheckBase):
    """No line of the new version's log (since it started) matches `pattern`."""

    kind: Literal["log"]
    pattern: str
    present: bool = False  # True: a matching line must be there

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value


class MetricCheck(CheckBase):
    kind: Literal["metric"]
    port: str = "api"
    path: str = "/metrics"
    metric: str  # a sample name in the Prometheus text
    labels: dict[str, str] = Field(default_factory=dict)
    op: Literal["==", "!=", "<", "<=", ">", ">="] = "=="
    value: float
    timeout_s: DurationS = 10.0


class ReadyWithinCheck(CheckBase):
    """The new version's start-to-ready time."""

    kind: Literal["ready_within"]
    within_s: DurationS


class FileCheck(CheckBase):
    """A path in the data (host path, or inside the container for docker)."""

    kind: Literal["file"]
    path: str
    exists: bool = True
    owner: int | str | None = None  # uid or user name
    group: int | str | None = None
    mode: str | None = None  # octal, e.g. "0640"

    @field_validator("mode")
    @classmethod
    def _octal(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"0?[0-7]{3,4}", value):
            raise ValueError(f"not an octal mode: {value!r} (e.g. '0640')")
        return value


class CorpusCheck(CheckBase):
    """The corpus snapshot's names asked again of the new version; differences by category."""

    kind: Literal["corpus"]
    snapshot: str
    max_differences: int = Field(default=0, ge=0)
    # Categories not counted, e.g. [ttl] for a resolver whose cached TTLs count down.
    ignore: list[Literal["no_reply", "rcode", "answers", "ttl", "flags"]] = Field(
        default_factory=list
    )


class CommandCheck(CheckBase):
    """A command in the version's container (`docker exec`) or on the host in its data
    directory: e.g. the new version's config checker, or its control tool's statistics."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    timeout_s: DurationS = 60.0
    exit_code: int = 0
    stdout_contains: list[str] = Field(default_factory=list)
    stdout_matches: str | None = None  # a regex one line of stdout must match

    @field_validator("stdout_matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return value


class SwapCheck(CheckBase):
    """Bounds on what the plan's `load:` saw during the swap."""

    kind: Literal["swap"]
    max_lost: int | None = Field(default=None, ge=0)
    max_gap_s: DurationS | None = None

    @model_validator(mode="after")
    def _some(self) -> SwapCheck:
        if self.max_lost is None and self.max_gap_s is None:
            raise ValueError("give max_lost, max_gap_s or both")
        return self


Check = Annotated[
    ApiCheck
    | DigCheck
    | UnchangedCheck
    | LogCheck
    | MetricCheck
    | ReadyWithinCheck
    | FileCheck
    | SwapCheck
    | CorpusCheck
    | CommandCheck,
    Field(discriminator="kind"),
]
CHECK_KINDS = (
    "api",
    "dig",
    "unchanged",
    "log",
    "metric",
    "ready_within",
    "file",
    "swap",
    "corpus",
    "command",
)


class Checklist(StrictModel):
    """A checklist file (checks/*.yaml): a list of checks, or a mapping with `checks:`."""

    checks: list[Check] = Field(default_factory=list)


# ---------------------------------------------------------------- rollback


class Rollback(StrictModel):
    """After the new version's checks: the old version started again on the data the
    new one wrote (optionally after a down-migration), with its own checklist."""

    old: TargetConfig | None = None  # default: the plan's `old`
    migrate: Migrate | None = None
    checks: list[Check] = Field(min_length=1)


# ---------------------------------------------------------------- version matrix


class Matrix(StrictModel):
    """Several old versions against one new: each entry is a label and the plan
    values it sets (`key.path: value`, as `--set`), e.g.
    `old: {"4.4": {vars.old_image: app:4.4, old.version: "4.4"}}`."""

    old: dict[str, dict[str, Any]] = Field(min_length=1)


# ---------------------------------------------------------------- the plan


class UpgradePlan(FileModel):
    name: str
    description: str = ""
    allow_targets: list[str] = Field(default_factory=list)
    old: TargetConfig
    new: TargetConfig
    data: DataSpec = Field(default_factory=DataSpec)
    vars: dict[str, str] = Field(default_factory=dict)  # defaults for {{name}}
    # Names whose values are never printed; names with key/token/secret/password are too.
    secrets: list[str] = Field(default_factory=list)
    populate: list[PopulateStep] = Field(default_factory=list)
    snapshot: list[SnapshotItem] = Field(default_factory=list)
    migrate: Migrate | None = None
    load: SwapLoad | None = None  # a steady load through the swap
    checks: list[Check] = Field(min_length=1)
    rollback: Rollback | None = None
    matrix: Matrix | None = None
    sinks: list[SinkConfig] = Field(default_factory=list)
    _source: str = PrivateAttr(default="plan")

    @property
    def source(self) -> str:
        return self._source

    def saved_names(self) -> set[str]:
        names: set[str] = set()
        for step in self.populate:
            if isinstance(step, ApiStep):
                names.update(step.save)
            elif isinstance(step, CommandStep) and step.save_stdout:
                names.add(step.save_stdout)
        return names


# ---------------------------------------------------------------- loading


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


def _cross_check(plan: UpgradePlan, env: dict[str, str]) -> list[str]:
    """What one field's validator cannot see: names that refer to other parts."""
    problems = _checklist_problems(plan, plan.checks, "checks")
    snapshots = [s.name for s in plan.snapshot]
    if len(set(snapshots)) != len(snapshots):
        problems.append("snapshot: item names must be unique")
    if plan.rollback is not None:
        problems += _checklist_problems(plan, plan.rollback.checks, "rollback.checks")
        for i, check in enumerate(plan.rollback.checks):
            if isinstance(check, SwapCheck):
                problems.append(f"rollback.checks.{i}: no load runs through a rollback")
        rb_old = plan.rollback.old
        if rb_old is not None and rb_old.runtime != plan.old.runtime:
            problems.append("rollback.old.runtime: it shares the data, so the same runtime")
        if (
            plan.rollback.migrate
            and plan.rollback.migrate.container
            and plan.old.runtime != "docker"
        ):
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
    if plan.old.runtime != plan.new.runtime:
        problems.append("new.runtime: old and new share data, so they need the same runtime")
    if plan.data.archive:
        problems += _archive_problems(plan.resolve_path(plan.data.archive))
    if plan.data.owner and plan.old.runtime != "docker":
        problems.append("data.owner: docker plans only (process data belongs to the user)")
    if plan.data.volume and plan.old.runtime != "docker":
        problems.append("data.volume: a named volume needs docker targets")
    if plan.migrate and plan.migrate.container and plan.old.runtime != "docker":
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
    for item in overrides:
        key, sep, raw_value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--set takes key.path=value, got {item!r}")
        try:
            set_path(data, key, yaml.safe_load(raw_value))
        except (IndexError, ValueError, TypeError, AttributeError) as exc:
            raise InputError(f"--set {item!r}: no such place in the plan ({exc})") from exc
    base_dir = path.resolve().parent
    if "checks" in data:
        data = {**data, "checks": _expand_checks(data["checks"], base_dir, str(path))}
    rollback = data.get("rollback")
    if isinstance(rollback, dict) and "checks" in rollback:
        checks = _expand_checks(rollback["checks"], base_dir, f"{path}: rollback")
        data = {**data, "rollback": {**rollback, "checks": checks}}
    where = f"{path} (matrix entry {matrix_entry})" if matrix_entry else str(path)
    plan = validate_model(UpgradePlan, data, where)
    plan._base_dir = base_dir
    plan._source = str(path)
    problems = _cross_check(plan, dict(os.environ) if env is None else env)
    if problems:
        raise InputError(f"{where}: " + f"\n{where}: ".join(problems))
    if matrix_entry is None and plan.matrix is not None:
        for label in plan.matrix.old:
            load_plan(path, overrides, env, matrix_entry=label)
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
