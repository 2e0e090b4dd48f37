"""Pass/fail criteria of a run, over the whole run and over sliding windows.

Pure: the inputs are plain series of (time_ns, value) and counts gathered in
a RunData (run_data_from_store, in soak.analysis.rundata, reads one from
the point store). Every
criterion the scenario sets gives at least one CriterionResult for the whole
run; ratios and rates also give one for the worst sliding window, since a
five-minute outage hides in a week's average.

How each is judged (samples after the warm-up):
- lost_ratio: lost / sent of the `all` class (or the sum of the classes).
- wrong_answers: the count over the run (a count can only grow with the window).
- p99_ms[class]: the p99 of the span's queries, read from the merged latency
  histograms of its windows (soak.analysis.latency): the estimator of every latency
  figure of a run.
- restarts: target restarts over the whole run, warm-up included: a crash is
  never warm-up noise.
- leak[resource]: the verdict is not `growing`.
- api_latency_ms[endpoint]: the slowest call.
- querylog_dropped: the increase of the drop counter (counter resets, i.e.
  target restarts, are followed, not read as negative drops).
A criterion with no samples to judge fails: a missing sample is evidence. A run
whose target never started has no samples at all, and nothing to judge: each of its
criteria is `not judged` (`never_judged`), with the reason.
A criterion that cannot be judged (a leak verdict over too few windows, in the start-up
wait) is `not judged`: never a pass (`ok` False, `judged` False), never a failure; its
`why` says which (soak.analysis.judged, where a run's criteria are counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from soak.analysis.judged import CriterionResult, failed, leak_why, result_of
from soak.analysis.latency import window_quantiles
from soak.analysis.leaks import LeakVerdict
from soak.analysis.machine import machine_in_window, without_busy_ticks
from soak.analysis.rundata import ClassSeries, RunData, Series, run_data_from_store
from soak.analysis.scenario_sections import CriteriaConfig
from soak.analysis.sliding import counter_increments, worst_window
from soak.clock import ns_to_s, s_to_ns
from soak.traffic.replay_config import BOUND_P99_US

__all__ = [
    "ClassSeries",
    "CriterionResult",
    "RunData",
    "Series",
    "evaluate_criteria",
    "failed",
    "generator_cause",
    "lost_agents_text",
    "never_judged",
    "result_of",
    "run_data_from_store",
]


# Share of the asked rate the load engine must send for the run not to be generator-bound:
# below it, a lost_ratio or p99 failure is partly the generator's.
GENERATOR_MIN_SHARE = 0.9


def evaluate_criteria(cfg: CriteriaConfig, data: RunData) -> list[CriterionResult]:
    """Every criterion the scenario sets, judged on the run's data."""
    results: list[CriterionResult] = []
    if data.expect_load:
        generator = _generator(data)
        results += generator
        if cfg.lost_ratio_max is not None:
            lost = _lost_ratio(cfg, data)
            if generator and not generator[0].ok:  # the losses are partly the generator's
                cause = generator_cause(data.lost_agents)
                lost = [replace(c, message=f"{c.message} ({cause})") for c in lost]
            results += lost
        if cfg.wrong_answers_max is not None:
            results.append(_wrong_answers(cfg.wrong_answers_max, data))
        for cls, limit in cfg.p99_ms_max.items():
            results += _p99(cls, limit, cfg.window_s, data, cfg.host_busy_max)
    if cfg.restarts_max is not None:
        ok = data.restarts <= cfg.restarts_max
        msg = f"{data.restarts} target restart(s), at most {cfg.restarts_max} allowed"
        results.append(CriterionResult("restarts", ok, data.restarts, cfg.restarts_max, "run", msg))
    if cfg.leaks_ok:
        results += [_leak(v) for v in data.verdicts]
    for endpoint, limit in cfg.api_latency_ms_max.items():
        results.append(_api_latency(endpoint, limit, data))
    if cfg.querylog_dropped_max is not None:
        results += _querylog_dropped(cfg.querylog_dropped_max, cfg.window_s, data)
    return results


def never_judged(cfg: CriteriaConfig, reason: str, *, expect_load: bool) -> list[CriterionResult]:
    """Every criterion the scenario sets, `not judged` for `reason` (a target that never
    started): the same names and limits as a run with data would list."""
    nothing = RunData(start_ns=0, end_ns=0, expect_load=expect_load)
    return [
        replace(c, ok=False, judged=False, value=None, message=reason, why=reason)
        for c in evaluate_criteria(cfg, nothing)
    ]


# ---------------------------------------------------------------- criteria


def _total_class(data: RunData) -> ClassSeries | None:
    """The `all` class, or the classes summed tick by tick when it is absent."""
    if "all" in data.load:
        return data.load["all"]
    if not data.load:
        return None
    out = ClassSeries()
    for name in ("due", "sent", "completed", "lost", "wrong_answers"):
        acc: dict[int, float] = {}
        for cs in data.load.values():
            for t, v in getattr(cs, name):
                acc[t] = acc.get(t, 0.0) + v
        setattr(out, name, sorted(acc.items()))
    return out


def _generator(data: RunData) -> list[CriterionResult]:
    """Whether the load engine sent what the phases asked. A run whose generator fell
    behind is generator-bound: its losses and latencies are partly the generator's,
    not only the server's. The first tick (the load starting mid-window) is left out."""
    total = data.load.get("all")
    if total is None:
        return []
    if total.due:
        return _timing_kept(total, _generator_of_windows(total, data.lost_agents))
    achieved = dict(total.rate_achieved)
    pairs = [(r, achieved[t]) for t, r in total.rate_target[1:] if t in achieved and r > 0]
    asked_qps = sum(r for r, _ in pairs)
    if asked_qps <= 0:
        return []  # flat out (rate 0) asks for nothing in particular
    sent_qps = sum(a for _, a in pairs)
    of_what = (
        f"the asked rate (mean {sent_qps / len(pairs):,.0f} of {asked_qps / len(pairs):,.0f} q/s)"
    )
    return _generator_result(sent_qps / asked_qps, of_what, data.lost_agents)


def _generator_result(
    share: float, of_what: str, lost_agents: Sequence[str]
) -> list[CriterionResult]:
    """The `generator` criterion: `share` of `of_what` sent, at least GENERATOR_MIN_SHARE."""
    ok = share >= GENERATOR_MIN_SHARE
    what = (
        "the generator kept" if ok else f"{generator_cause(lost_agents)}: the generator sent only"
    )
    message = f"{what} {share:.1%} of {of_what}, at least {GENERATOR_MIN_SHARE:.0%}"
    return [CriterionResult("generator", ok, share, GENERATOR_MIN_SHARE, "run", message)]


def generator_cause(lost_agents: Sequence[str]) -> str:
    """Why the generator fell behind, as a failure names it: the agents lost (their share
    went with them), else "generator-bound"."""
    return lost_agents_text(lost_agents) if lost_agents else "generator-bound"


def lost_agents_text(lost: Sequence[str]) -> str:
    """ "agent 1 of 2 lost at +0:00:11" (each event's reason left to the events)."""
    return "; ".join(message.split(": ", 1)[0] for message in lost)


def _generator_of_windows(total: ClassSeries, lost_agents: Sequence[str]) -> list[CriterionResult]:
    """Sent over due, summed over the ledger's windows: an open-loop generator cannot send
    more than was due, so the share is never above 1."""
    due = sum(v for _, v in total.due)
    if due <= 0:
        return []  # flat out (rate 0) asks for nothing in particular
    sent = sum(v for _, v in total.sent)
    of_what = f"the due queries ({sent:,.0f} of {due:,.0f} sent)"
    return _generator_result(sent / due, of_what, lost_agents)


def _timing_kept(total: ClassSeries, found: list[CriterionResult]) -> list[CriterionResult]:
    """A replay whose windows' send-offset p99 passed BOUND_P99_US in more than the share
    the rate may miss did not keep the capture's timing: generator-bound as well."""
    p99s = [v for _, v in total.send_offset_p99_us]
    kept = sum(1 for v in p99s if v <= BOUND_P99_US) / len(p99s) if p99s else 1.0
    if kept >= GENERATOR_MIN_SHARE or not found:
        return found
    message = f"generator-bound: the replay kept its send offset p99 within {BOUND_P99_US:,} µs"
    message += f" in only {kept:.1%} of its windows; {found[0].message}"
    return [replace(found[0], ok=False, message=message)]


def _lost_ratio(cfg: CriteriaConfig, data: RunData) -> list[CriterionResult]:
    limit = cfg.lost_ratio_max
    assert limit is not None
    total = _total_class(data)
    if total is None or not total.sent:
        return [_missing("lost_ratio", limit, "no load samples to judge lost queries")]
    lost_by_t = dict(total.lost)
    num = [(t, lost_by_t.get(t, 0.0)) for t, _ in total.sent]
    sent, lost = sum(v for _, v in total.sent), sum(v for _, v in num)
    run_ratio = lost / sent if sent else 0.0
    out = [
        CriterionResult(
            "lost_ratio",
            run_ratio <= limit,
            run_ratio,
            limit,
            "run",
            f"{lost:,.0f} of {sent:,.0f} queries lost ({run_ratio:.4%}), at most {limit:.4%}",
        )
    ]
    worst = worst_window(num, total.sent, _ns(cfg.window_s))
    if worst is not None:
        ratio, end_ns = worst
        out.append(
            CriterionResult(
                "lost_ratio",
                ratio <= limit,
                ratio,
                limit,
                _window_name(cfg.window_s, end_ns, data),
                f"worst {cfg.window_s:g} s window lost {ratio:.4%}, at most {limit:.4%}",
            )
        )
    return out


def _wrong_answers(limit: int, data: RunData) -> CriterionResult:
    total = _total_class(data)
    if total is None:
        return _missing("wrong_answers", limit, "no load samples to judge answers")
    count = sum(v for _, v in total.wrong_answers)
    per_class = {
        name: sum(v for _, v in cs.wrong_answers)
        for name, cs in sorted(data.load.items())
        if name != "all"
    }
    where = ", ".join(f"{k} {v:,.0f}" for k, v in per_class.items() if v)
    msg = f"{count:,.0f} wrong answer(s), at most {limit:,}" + (f" ({where})" if where else "")
    return CriterionResult("wrong_answers", count <= limit, count, limit, "run", msg)


def _p99(
    cls: str, limit: float, window_s: float, data: RunData, host_busy_max: float | None = None
) -> list[CriterionResult]:
    name = f"p99_ms[{cls}]"
    cs = data.load.get(cls)
    ticks, busy_ticks = without_busy_ticks(cs.latency if cs else [], data, host_busy_max)
    if busy_ticks and not ticks:
        message = f"{cls}: not judged: the machine was over {host_busy_max:.0%} busy throughout"
        why = f"the machine was over {host_busy_max:.0%} busy throughout"
        return [CriterionResult(name, True, None, limit, "run", message, False, why)]
    run_p99, worst = window_quantiles(ticks, 0.99, _ns(window_s))
    if run_p99 is None:
        return [_missing(name, limit, f"no latency samples for class {cls!r}")]
    left_out = (
        f" ({busy_ticks} tick(s) with the machine over {host_busy_max:.0%} busy not judged)"
        if busy_ticks
        else ""
    )
    out = [
        CriterionResult(
            name,
            run_p99 <= limit,
            run_p99,
            limit,
            "run",
            f"{cls}: p99 {run_p99:.3f} ms over the run, at most {limit:g} ms{left_out}",
        )
    ]
    if worst is not None:
        value, end_ns = worst
        out.append(
            CriterionResult(
                name,
                value <= limit,
                value,
                limit,
                _window_name(window_s, end_ns, data),
                f"{cls}: worst {window_s:g} s window p99 {value:.3f} ms, at most {limit:g} ms"
                + machine_in_window(data, end_ns - _ns(window_s), end_ns),
            )
        )
    return out


def _leak(v: LeakVerdict) -> CriterionResult:
    slope, limit = (
        _per_hour(v.resource, v.slope_per_hour),
        _per_hour(v.resource, v.threshold_per_hour),
    )
    recent = _per_hour(v.resource, v.recent_slope_per_hour)
    messages = {
        "growing": f"{v.resource} growing at {slope} (threshold {limit}), p={v.p_value:.2g}",
        "levelling": f"{v.resource} grew, then levelled (now {recent}, threshold {limit})",
        "insufficient": (
            f"{v.resource} at {slope} (threshold {limit})"  # a wait: the note says which
            if v.note
            else f"{v.resource}: too few windows to judge ({v.windows})"
        ),
        "ok": f"{v.resource} flat: {slope} (threshold {limit})",
    }
    judged = v.verdict != "insufficient"
    said = messages.get(v.verdict, f"{v.resource}: {v.verdict}")
    return CriterionResult(
        f"leak[{v.resource}]",
        judged and v.verdict != "growing",
        v.slope_per_hour,
        v.threshold_per_hour,
        "run",
        f"{said}; {v.note}" if v.note else said,  # why a rise was not `growing`
        judged=judged,
        why="" if judged else leak_why(v),
    )


def _per_hour(resource: str, value: float) -> str:
    """Three figures, never an exponent: 45.6 MiB/h, 9.05 GiB/h, 357,120/h."""
    if resource.endswith("_bytes"):
        mib = value / 1024**2
        return f"{mib / 1024:.3g} GiB/h" if abs(mib) >= 1024 else f"{mib:.3g} MiB/h"
    return f"{value:,.0f}/h" if abs(value) >= 1000 else f"{value:.3g}/h"


def _api_latency(endpoint: str, limit: float, data: RunData) -> CriterionResult:
    name = f"api_latency_ms[{endpoint}]"
    series = data.api_latency_ms.get(endpoint)
    if not series:
        return _missing(name, limit, f"no latency samples for {endpoint}")
    t_max, v_max = max(series, key=lambda tv: tv[1])
    return CriterionResult(
        name,
        v_max <= limit,
        v_max,
        limit,
        "run",
        f"{endpoint}: slowest call {v_max:.1f} ms at {_offset(t_max, data)}, at most {limit:g} ms",
    )


def _querylog_dropped(limit: float, window_s: float, data: RunData) -> list[CriterionResult]:
    name = "querylog_dropped"
    increments = counter_increments(data.querylog_dropped_total)
    if not data.querylog_dropped_total:
        return [_missing(name, limit, "no querylog_dropped_total samples")]
    total = sum(v for _, v in increments)
    out = [
        CriterionResult(
            name, total <= limit, total, limit, "run", f"{total:,.0f} dropped, at most {limit:,g}"
        )
    ]
    ones = [(t, 1.0) for t, _ in increments]
    worst = worst_window(increments, ones, _ns(window_s), ratio=False)
    if worst is not None:
        value, end_ns = worst
        msg = f"worst {window_s:g} s window dropped {value:,.0f}, at most {limit:,g}"
        out.append(
            CriterionResult(
                name, value <= limit, value, limit, _window_name(window_s, end_ns, data), msg
            )
        )
    return out


def _missing(name: str, limit: float, message: str) -> CriterionResult:
    return CriterionResult(name, False, None, limit, "run", message)


def _ns(seconds: float) -> int:
    return s_to_ns(seconds)


def _offset(t_ns: int, data: RunData) -> str:
    start = data.run_start_ns if data.run_start_ns is not None else data.start_ns
    return "+" + format_hms(ns_to_s(t_ns - start))


def _window_name(window_s: float, end_ns: int, data: RunData) -> str:
    return f"{window_s:g} s to {_offset(end_ns, data)}"


def format_hms(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
