"""What the run does against a started version: API calls, DNS queries, commands,
waits, snapshot items, file facts. The only I/O of populate, snapshot and checks.

A step that does not do what the plan says raises StepFailed (the run reports it
and stops); network faults never raise, they come back in the probe results.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from soak.errors import InputError, SoakError
from soak.netsafety import check_allowed
from soak.placeholders import fill as fill_placeholders
from soak.probes import DnsResult, HttpResult, dns_query, http_request
from soak.targets import readiness
from soak.targets.base import Running
from soak.upgrade import jsonpath
from soak.upgrade.config import (
    ApiSnapshot,
    ApiStep,
    CommandStep,
    DigSnapshot,
    DnsStep,
    PopulateStep,
    SnapshotItem,
    WaitStep,
)
from soak.upgrade.judge import FileFacts, api_record, body_excerpt, dig_record, status_ok
from soak.upgrade.template import Values

MAX_QUERY_FILE_LINES = 1_000_000  # bounded memory for "N queries from a file"


class StepFailed(SoakError):
    """A populate, snapshot or migrate step that did not do what the plan says;
    `output_lines`: the last lines it printed (stderr's first), for the failed case."""

    exit_code = 1

    def __init__(self, message: str, output_lines: list[str] | None = None) -> None:
        super().__init__(message)
        self.output_lines = output_lines or []


@dataclass
class Version:
    """One started version (old or new) and what steps need to reach it."""

    label: str  # "old" or "new"
    running: Running
    data_dir: Path | None  # host path of the data (process targets)
    env: dict[str, str] = field(default_factory=dict)  # the target's environment
    allow_targets: list[str] = field(default_factory=list)

    def placeholders(self) -> dict[str, str]:
        values = {"host": self.running.host}
        if self.data_dir is not None:
            values["data_dir"] = str(self.data_dir)
        if self.running.run_dir is not None:
            values["run_dir"] = str(self.running.run_dir)
        values.update({f"port.{k}": str(v) for k, v in self.running.ports.items()})
        return values

    def url(self, port_name: str, path: str) -> str:
        host, port = self._address(port_name)
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"

    def dns_address(self, port_name: str) -> tuple[str, int]:
        return self._address(port_name)

    def _address(self, port_name: str) -> tuple[str, int]:
        if port_name not in self.running.ports:
            known = ", ".join(sorted(self.running.ports)) or "none"
            raise InputError(f"{self.label}: no port named {port_name!r} (named ports: {known})")
        host, port = self.running.address(port_name)
        check_allowed(host, self.allow_targets)
        return host, port


def render(values: Values, version: Version, obj: Any) -> Any:
    """`{{name}}` values, then the version's `{data_dir}`-style placeholders."""
    filled = values.render(obj)
    return _fill(filled, version.placeholders())


def _fill(obj: Any, placeholders: dict[str, str]) -> Any:
    if isinstance(obj, str):
        return fill_placeholders(obj, placeholders)
    if isinstance(obj, dict):
        return {k: _fill(v, placeholders) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_fill(v, placeholders) for v in obj]
    return obj


# ---------------------------------------------------------------- requests


class ApiRequest(Protocol):
    """The request of an api step, check or snapshot (a snapshot is a GET without a body)."""

    @property
    def port(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def headers(self) -> dict[str, str]: ...
    @property
    def body(self) -> Any: ...
    @property
    def timeout_s(self) -> float: ...


def api_call(values: Values, version: Version, req: ApiRequest) -> HttpResult:
    return http_request(
        req.method.upper(),
        version.url(req.port, render(values, version, req.path)),
        headers=render(values, version, req.headers),
        json=render(values, version, req.body),
        timeout_s=req.timeout_s,
    )


def dig(
    values: Values,
    version: Version,
    port: str,
    qname: str,
    rtype: str,
    protocol: str,
    timeout_s: float,
) -> DnsResult:
    host, dns_port = version.dns_address(port)
    name = render(values, version, qname)
    return dns_query(host, dns_port, name, rtype, protocol=protocol, timeout_s=timeout_s)


# ---------------------------------------------------------------- populate


def run_api_step(step: ApiStep, values: Values, version: Version) -> str:
    result = api_call(values, version, step)
    if not status_ok(step.status, result.status):
        want = "2xx" if step.status is None else str(step.status)
        got = result.error or f"{result.status}: {body_excerpt(result)}"
        raise StepFailed(f"expected status {want}; got {got}")
    saved = []
    if step.save:
        try:
            doc = result.json()
        except ValueError as exc:
            raise StepFailed(f"cannot save from a body that is not JSON: {exc}") from exc
        for name, path in step.save.items():
            found = jsonpath.select(doc, path)
            if not found:
                raise StepFailed(f"save {name}: nothing at {path} in {body_excerpt(result)}")
            values.save(name, found[0])
            saved.append(name)
    return f"{result.status}" + (f", saved {', '.join(saved)}" if saved else "")


def query_file_lines(path: Path) -> list[tuple[str, str]]:
    """("name", "TYPE") pairs from a file of `name [type]` lines; # comments allowed."""
    pairs: list[tuple[str, str]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                fields = line.split("#", 1)[0].split()
                if fields:
                    pairs.append((fields[0], fields[1].upper() if len(fields) > 1 else "A"))
                if len(pairs) >= MAX_QUERY_FILE_LINES:
                    break
    except OSError as exc:
        raise InputError(f"cannot read query file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise InputError(f"query file {path}: not UTF-8 text") from None
    if not pairs:
        raise InputError(f"query file {path} holds no queries")
    return pairs


def run_dns_step(step: DnsStep, values: Values, version: Version, base_dir: Path) -> str:
    if step.file:
        file_path = Path(render(values, version, step.file))
        pairs = query_file_lines(file_path if file_path.is_absolute() else base_dir / file_path)
    else:
        pairs = [(q.name, q.type) for q in step.queries]
    count = step.count or len(pairs)
    rcodes: dict[str, int] = {}
    for i in range(count):
        name, rtype = pairs[i % len(pairs)]
        result = dig(values, version, step.port, name, rtype, step.protocol, step.timeout_s)
        rcode = result.rcode or f"no reply ({result.error})"
        rcodes[rcode] = rcodes.get(rcode, 0) + 1
        if step.rcode is not None and result.rcode != step.rcode.upper():
            raise StepFailed(f"{name}/{rtype}: expected {step.rcode.upper()}; got {rcode}")
    summary = ", ".join(f"{n} {code}" for code, n in sorted(rcodes.items()))
    return f"{count} queries: {summary}"


def run_populate_step(step: PopulateStep, values: Values, version: Version, base_dir: Path) -> str:
    """A populate step against the version; its one-line result (StepFailed if it fails)."""
    if isinstance(step, ApiStep):
        return run_api_step(step, values, version)
    if isinstance(step, DnsStep):
        return run_dns_step(step, values, version, base_dir)
    if isinstance(step, CommandStep):
        return run_command_step(step, values, version)
    return run_wait_step(step, version)


def filled(values: Values, version: Version, text: str) -> str:
    """`{{name}}` and `{port.NAME}`-style placeholders filled, as the step sends them
    (a name that cannot be filled yet stays as written)."""
    try:
        return str(render(values, version, text))
    except InputError:
        return text


def run_host_command(
    argv: list[str], env: dict[str, str], timeout_s: float, cwd: Path | None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            env={**os.environ, **env},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError as exc:
        raise StepFailed(f"command not found: {argv[0]}") from exc
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"{argv[0]} did not finish within {timeout_s:g} s") from exc


def run_command(
    argv: list[str], version: Version, env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """On the host, in the target's environment and data directory, or in its container."""
    if version.running.container_id:
        return _exec_in_container(version.running.container_id, argv, env, timeout_s)
    return run_host_command(argv, {**version.env, **env}, timeout_s, version.data_dir)


def _exec_in_container(
    container_id: str, argv: list[str], env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    cmd = ["docker", "exec", *(f"--env={k}={v}" for k, v in env.items()), container_id, *argv]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"{argv[0]} did not finish within {timeout_s:g} s") from exc


def command_failure(proc: subprocess.CompletedProcess[str]) -> str:
    out = (proc.stderr or proc.stdout or "").strip().splitlines()
    return f"exit {proc.returncode}" + (f": {out[-1][:300]}" if out else "")


def run_command_step(step: CommandStep, values: Values, version: Version) -> str:
    argv = render(values, version, step.argv)
    proc = run_command(argv, version, render(values, version, step.env), step.timeout_s)
    if proc.returncode != 0:
        raise StepFailed(command_failure(proc))
    if step.save_stdout:
        values.save(step.save_stdout, proc.stdout.strip())
        return f"exit 0, saved {step.save_stdout}"
    return "exit 0"


def run_wait_step(step: WaitStep, version: Version) -> str:
    start_s = time.monotonic()
    deadline_s = start_s + step.timeout_s
    while True:
        outcome = readiness.check(step.probe, version.running, min(2.0, step.timeout_s))
        if outcome.ok:
            return f"passed after {time.monotonic() - start_s:.2f} s"
        if time.monotonic() >= deadline_s:
            raise StepFailed(f"{readiness.describe(step.probe)}: {outcome.detail}")
        time.sleep(step.interval_s)


# ---------------------------------------------------------------- snapshot


def take_snapshot(item: SnapshotItem, values: Values, version: Version) -> dict[str, Any]:
    if isinstance(item, ApiSnapshot):
        result = api_call(values, version, item)
        return api_record(result)
    assert isinstance(item, DigSnapshot)
    return dig_record(
        dig(values, version, item.port, item.qname, item.type, item.protocol, item.timeout_s)
    )


# ---------------------------------------------------------------- files


def file_facts(path: str, version: Version) -> FileFacts:
    """Owner, group and mode of a path: on the host, or inside the version's container."""
    if version.running.container_id:
        proc = _exec_in_container(
            version.running.container_id, ["stat", "-c", "%u %g %U %G %a", path], {}, 10.0
        )
        if proc.returncode != 0:
            return FileFacts(exists=False)
        uid, gid, user, group, mode = proc.stdout.split()
        return FileFacts(True, int(uid), int(gid), user, group, int(mode, 8))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return FileFacts(exists=False)
    return FileFacts(
        True,
        st.st_uid,
        st.st_gid,
        _user_name(st.st_uid),
        _group_name(st.st_gid),
        st.st_mode & 0o7777,
    )


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None
