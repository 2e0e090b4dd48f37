"""A run's reports: what the report module needs, gathered from the run's record and store.

Reports are written into the run directory at the end of a run; `soak report`
and `GET /runs/{id}/report` serve those files, or build them on demand for a
run that is still going.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from soak.analysis import CriterionResult, LeakVerdict, evaluate_criteria, run_data_from_store
from soak.analysis.criteria import never_judged
from soak.analysis.judged import so_far
from soak.analysis.rundata import stored_verdicts
from soak.analysis.segments import VersionSpan, version_spans
from soak.clock import ns_to_s
from soak.config import Scenario
from soak.errors import InputError
from soak.placeholders import Placeholders, fill_services, render_known
from soak.report import PhaseSpan, ReportInput
from soak.report.witnesses import ScheduledPhase
from soak.results.grew import report_section
from soak.runs import timeline
from soak.runs.events import EventRecord
from soak.runs.layout import DataDir, read_result, read_swaps, report_path
from soak.runs.state import RunRecord, StateStore
from soak.runs.supervise import as_seen
from soak.sinks.sqlite import SqliteStore
from soak.targets.base import Running
from soak.targets.specs import DockerTarget, ProcessTarget
from soak.traffic.replay_config import ReplayConfig
from soak.words import counted, loops_text

REPORT_MEDIA = {
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
}


def render_all(points_path: Path, state: StateStore, record: RunRecord) -> dict[str, str]:
    """The three renderings of one run's report."""
    from soak.report import render_html, render_json, render_markdown
    from soak.report.audit import ACCOUNTING_EVENT

    report, disagree = audited_report(points_path, state, record)
    report["accounting"] = disagree
    if disagree and record.ended_ns is not None:  # an ended run's figures are final
        for line in disagree:
            state.add_event(record.id, record.ended_ns, ACCOUNTING_EVENT, line, 0.0)
    return {
        "html": render_html(report),
        "json": render_json(report),
        "md": render_markdown(report),
    }


def audited_report(
    points_path: Path, state: StateStore, record: RunRecord
) -> tuple[dict[str, Any], list[str]]:
    """The run's report built from its store, and what of its load figures disagrees
    with its ledger and result.json (soak.report.audit)."""
    from soak.report import build_report
    from soak.report.audit import audit

    store = SqliteStore(points_path)
    try:
        inp = report_input(record, state, store)
        report = build_report(store, inp, what_grew=report_section)
        result = read_result(record.run_dir) or {}
        found = audit(
            store,
            record.id,
            report,
            result.get("load_totals"),
            scheduled_phases(record),
            result.get("capture"),
        )
        return report, found
    finally:
        store.close()


def scheduled_phases(record: RunRecord) -> list[ScheduledPhase]:
    """The run's phases as scheduled: the witness the ledger's due is held against, the
    seconds an agent started late and those the service was away included (both counted
    as skipped, soak.load.fleet.lease and soak.runs.away). Not a replay: its seconds
    are due by its capture's timing, not a rate."""
    from soak.units import MAX_RATE_QPS

    load = record.scenario.load
    if load is None or load.replay is not None:
        return []
    default = load.rate_qps
    out = []
    for phase in record.scenario.phases:
        rate = phase.rate_qps if phase.rate_qps is not None else default
        flat_out = rate is None or rate >= MAX_RATE_QPS
        out.append(ScheduledPhase(phase.name, None if flat_out else rate, phase.duration_s))
    return out


def report_input(record: RunRecord, state: StateStore, store: SqliteStore) -> ReportInput:
    """The run as the report sees it; criteria and verdicts from the result file once
    the run has ended, else judged now on what is stored. A foreground run whose
    command is gone is reported as `abandoned` (soak.runs.supervise.as_seen)."""
    record = as_seen(record)
    scenario = record.scenario
    origin_ns = record.origin_ns if record.origin_ns is not None else record.created_ns
    spans = timeline.timeline(scenario, origin_ns)
    now_ns = record.ended_ns if record.ended_ns is not None else time.time_ns()
    result = read_result(record.run_dir)
    events = state.events(record.id)
    if result is not None:
        criteria = [CriterionResult(**c) for c in result.get("criteria", [])]
        verdicts = [LeakVerdict(**v) for v in result.get("verdicts", [])]
    elif record.ended_ns is not None and not any(e.kind == "ready" for e in events):
        verdicts = []
        criteria = never_judged(
            scenario.criteria, NEVER_STARTED, expect_load=scenario.load is not None
        )
    else:
        verdicts = stored_verdicts(store, record.id, scenario.leaks)
        data = run_data_from_store(
            store,
            record.id,
            timeline.warmup_end_ns(spans),
            run_start_ns=origin_ns,
            verdicts=verdicts,
            expect_load=scenario.load is not None,
        )
        criteria = evaluate_criteria(scenario.criteria, data)
        if record.ended_ns is None:  # still going: what has no samples yet is not failed yet
            criteria = so_far(criteria)
    return ReportInput(
        run_id=record.id,
        scenario_name=scenario.name,
        target_name=scenario.target.name,
        version=scenario.target.version,
        target_desc=target_description(scenario, record.target_state),
        started_ns=origin_ns,
        ended_ns=record.ended_ns,
        status=record.status,
        phases=ran_phases(spans, now_ns, ended=record.ended_ns is not None),
        planned_s=ns_to_s(timeline.end_ns(spans) - origin_ns) if spans else None,
        startup=startup_figures(events),
        detected_version=reported_version(scenario, events),
        criteria=criteria,
        verdicts=verdicts,
        description=scenario.description,
        extra=setup_table(scenario, record),
        run_dir=record.run_dir,
        memory_limit_bytes=scenario.memory_limit_bytes,
        versions=run_versions(record, origin_ns, now_ns),
        swaps={i + 1: s for i, s in enumerate(read_swaps(record.run_dir))},
        leaks=scenario.leaks,
    )


def run_versions(record: RunRecord, origin_ns: int, now_ns: int) -> list[VersionSpan]:
    """The versions the run has had, split at each swap that stopped the old one (the
    moment it did, from swaps.json); one span without swaps."""
    made = [(float(s["at_s"]), str(s["version"])) for s in read_swaps(record.run_dir)]
    return version_spans(origin_ns, now_ns, record.scenario.target.version, made)


# The criteria's detail for a run whose target never got ready: nothing ran to judge.
NEVER_STARTED = "not judged: the target never got ready, so nothing ran to judge"


def reported_version(scenario: Scenario, events: list[EventRecord]) -> str | None:
    """The version the target reported; why there is none when the scenario asked for one
    (the target never got ready, the command failed); None when it did not ask."""
    said = next((e.message for e in events if e.kind == "version"), None)
    asks = scenario.target.version_command or isinstance(scenario.target, DockerTarget)
    if said is not None or not asks:
        return said
    if not any(e.kind == "ready" for e in events):
        return "not read: the target never got ready (it is asked once the target is ready)"
    failed = next(
        (e.message for e in events if "could not read the target's version" in e.message), None
    )
    return f"not read: {failed}" if failed else "not read: the target said nothing"


def ran_phases(spans: list[timeline.PhaseSpan], now_ns: int, *, ended: bool) -> list[PhaseSpan]:
    """The phases as they ran: those begun by `now_ns`, the last one cut at the run's end
    (a stopped run's phase ends where it stopped); still open (None) while it runs."""
    out = []
    for s in spans:
        if s.start_ns >= now_ns:
            break
        end_ns: int | None = s.end_ns
        if s.end_ns > now_ns:
            end_ns = now_ns if ended else None
        out.append(PhaseSpan(s.name, s.start_ns, end_ns, s.warmup))
    return out


def target_description(scenario: Scenario, target_state: dict[str, Any] | None = None) -> str:
    """How the target runs; a process target's argv with the run's ports filled in.

    `target_state` is the run's stored state (the target's and helpers' ports); a
    placeholder it cannot fill (a run that never started) is left as written.
    """
    t = scenario.target
    if isinstance(t, DockerTarget):
        flags = [f"--network {t.network}"]
        flags += ["--read-only"] if t.read_only else []
        flags += [f"--cap-drop {c}" for c in t.cap_drop]
        flags += ["--security-opt no-new-privileges"] if t.no_new_privileges else []
        flags += [f"--cpuset-cpus {t.cpuset}"] if t.cpuset else []
        flags += ["a fresh named volume"] if t.volume is not None and not t.volume.name else []
        return f"docker {t.image} " + " ".join(flags)
    if isinstance(t, ProcessTarget):
        return "process: " + shown_argv(filled_argv(t.argv, target_state or {}))
    return "external (already running)"


# "Runs as" stays one line; the whole argv is in the scenario.
ARGV_SHOWN_CHARS = 200


def shown_argv(argv: list[str], max_chars: int = ARGV_SHOWN_CHARS) -> str:
    """`argv` as a shell would take it, cut between arguments, never inside one."""
    shown: list[str] = []
    for i, arg in enumerate(argv):
        quoted = shlex.quote(arg)
        if shown and len(" ".join([*shown, quoted])) > max_chars:
            return " ".join(shown) + f" ... ({counted(len(argv) - i, 'more argument')})"
        shown.append(quoted)
    return " ".join(shown)


def filled_argv(argv: list[str], target_state: dict[str, Any]) -> list[str]:
    """`argv` with `{port.X}`, `{host}`, `{run_dir}`, `{data_dir}` and
    `{service.NAME.port.X}` filled from a run's stored state, where known."""
    services = {
        name: Running.from_state(state)
        for name, state in (target_state.get("services") or {}).items()
        if state
    }
    target = target_state.get("target") or {}
    values = Placeholders(
        run_dir=str(target.get("run_dir") or "{run_dir}"),
        host=str(target.get("host") or "{host}"),
        ports={k: int(v) for k, v in (target.get("ports") or {}).items()},
        data_dir=str(target["data_dir"]) if target.get("data_dir") else None,
    )
    filled = []
    for i, arg in enumerate(argv):
        # A helper that never started: its placeholder stays as written.
        with contextlib.suppress(InputError):
            arg = fill_services(arg, services, f"target.argv.{i}")
        filled.append(render_known(arg, values))
    return filled


def startup_figures(events: list[EventRecord]) -> dict[str, float]:
    """Start-up times from the run's first `ready` and `condition` events."""
    figures: dict[str, float] = {}
    for e in events:
        if e.kind == "ready" and "ready_s" not in figures:
            figures["ready_s"] = e.value
        elif e.kind == "condition":
            name = e.message.split(" after ")[0]
            figures.setdefault(f"{name}_s", e.value)
    return figures


def setup_table(scenario: Scenario, record: RunRecord) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "samplers": f"every {scenario.samplers.interval_s:g} s",
        "leak windows": f"{scenario.leaks.window_s:g} s, verdicts every "
        f"{scenario.leaks.interval_s:g} s",
        "target restarts": record.restarts,
    }
    if scenario.load is not None and scenario.load.replay is not None:
        extra["load"] = replay_line(scenario.load.replay, read_result(record.run_dir))
    elif scenario.load is not None:
        load = scenario.load
        mix = ", ".join(f"{c.name} {c.weight:g}" for c in load.mix)
        extra["load"] = (
            f"{load.rate_qps:g} q/s {load.protocol}, {load.workers} worker(s), "
            f"{load.flows} flows; mix {mix}"
        )
    if scenario.services:
        extra["helpers"] = ", ".join(s.name for s in scenario.services)
    return extra


def replay_line(replay: ReplayConfig, result: dict[str, Any] | None) -> str:
    """ "replay of FILE (its pace): 40 clients, 2.67 loops of 1,200 queries; its process in
    SCHED_FIFO 1", the clients, loops and scheduling class once the run's result says them
    (loops: the ledger's due over a loop's)."""
    line = f"replay of {replay.path.name} ({replay.pace()})"
    totals = (result or {}).get("load_totals") or {}
    about = totals.get("replay") or {}
    per_loop, due = about.get("queries_per_loop"), totals.get("due")
    if isinstance(per_loop, int) and per_loop > 0 and isinstance(due, int | float):
        clients = counted(int(about.get("clients", 0)), "client")
        line += f": {clients}, {loops_text(due / per_loop)} of {per_loop:,} queries"
    if about.get("scheduling"):
        line += f"; its process in {about['scheduling']}"
    return line


def report_text(data_dir: DataDir, state: StateStore, record: RunRecord, fmt: str) -> str:
    """The written report of a finished run, else one built now from what is stored."""
    path = report_path(record.run_dir, fmt)
    if path.exists():
        return path.read_text()
    texts = render_all(data_dir.points_path(record.scenario, record.run_dir), state, record)
    return texts[fmt]


def local_audit(data_dir: DataDir, run_id: str) -> list[str]:
    """`soak audit RUN --data-dir DIR`: the run's report built again from its store and
    checked against its ledger (soak.report.audit); each disagreement of an ended run
    is recorded as an `accounting` event. The disagreements, empty when none."""
    from soak.report.audit import ACCOUNTING_EVENT

    with _local_run(data_dir, run_id) as (state, record):
        points_path = data_dir.points_path(record.scenario, record.run_dir)
        _, found = audited_report(points_path, state, record)
        if record.ended_ns is not None:
            for line in found:
                state.add_event(record.id, time.time_ns(), ACCOUNTING_EVENT, line, 0.0)
        return found


def local_witness_lines(data_dir: DataDir, run_id: str) -> list[str]:
    """What the engine's socket counters say of the run, or why they are not there
    (soak.report.witnesses.engine_counter_words: a witness skipped is said, never
    passed); then the server's own count and a dnstap capture's, where the run has them."""
    from soak.report.audit import ledger_sums, server_count
    from soak.report.witnesses import (
        CAPTURE,
        CAPTURE_BESIDES,
        capture_count,
        engine_counter_words,
        server_count_words,
    )

    with _local_run(data_dir, run_id) as (_, record):
        store = SqliteStore(data_dir.points_path(record.scenario, record.run_dir))
        try:
            windows = ledger_sums(store, record.id).all_windows
            server = server_count(store, record.id)
        finally:
            store.close()
        result = read_result(record.run_dir) or {}
        lines = [
            engine_counter_words(windows, result.get("load_totals")),
            server_count_words(windows, server),
            server_count_words(
                windows, capture_count(result.get("capture")), CAPTURE, CAPTURE_BESIDES
            ),
        ]
        return [line for line in lines if line]


def local_report_text(data_dir: DataDir, run_id: str, fmt: str) -> str:
    """`soak report RUN --data-dir DIR`: no service needed."""
    with _local_run(data_dir, run_id) as (state, record):
        return report_text(data_dir, state, record, fmt)


@contextlib.contextmanager
def _local_run(data_dir: DataDir, run_id: str) -> Iterator[tuple[StateStore, RunRecord]]:
    """The state store of `data_dir`, open, and the run's record in it; InputError when
    either is not there."""
    if not data_dir.state_db.exists():
        raise InputError(f"no soak state in {data_dir.root}")
    state = StateStore(data_dir.state_db)
    try:
        record = state.get_run(run_id)
        if record is None:
            raise InputError(f"no run {run_id!r} in {data_dir.root}")
        yield state, record
    finally:
        state.close()


def result_json(record: RunRecord) -> str:
    return json.dumps(read_result(record.run_dir) or {}, indent=2)
