"""The checks of an upgrade plan (`checks:`, `rollback.checks:`, checklist files)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from soak.units import DurationS, StrictModel
from soak.upgrade import jsonpath


def _regex(value: str) -> str:
    """A field that holds a regular expression: one that compiles."""
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from exc
    return value


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
        return _regex(value)


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
        return value if value is None else _regex(value)


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


# Where a check takes `{{name}}`: its request (filled as the request is sent) and its
# expected values (filled just before the verdict; in a regular expression, as literal
# text). Anywhere else `{{` would be compared or used as written: `validate` refuses it.
TEMPLATED_FIELDS: dict[str, frozenset[str]] = {
    "api": frozenset({"path", "headers", "json", "expect", "header"}),
    "dig": frozenset({"qname", "answers", "contains"}),
    "log": frozenset({"pattern"}),
    "metric": frozenset({"path", "labels"}),
    "file": frozenset({"path", "owner", "group"}),
    "command": frozenset({"argv", "env", "stdout_contains", "stdout_matches"}),
}
# Inside `expect:` items of an api check: the values, not the JSON path.
TEMPLATED_EXPECT_FIELDS = frozenset({"equals", "contains"})
# Regular expressions: a value is filled in escaped (it is text to find, not a pattern).
REGEX_FIELDS = frozenset({"pattern", "stdout_matches"})


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


class Checklist(StrictModel):
    """A checklist file (checks/*.yaml): a list of checks, or a mapping with `checks:`."""

    checks: list[Check] = Field(default_factory=list)
