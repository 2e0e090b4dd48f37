"""How busy the machine was beside a latency figure (the `host` sampler's points in a
RunData): a window's CPU busy share and CPU pressure, whether it was saturated, and the
ticks a scenario leaves out of the latency criteria (`criteria.host_busy_max`)."""

from __future__ import annotations

from soak.analysis.rundata import RunData

# A window in which the machine was this busy says more about the machine than about the
# server (docs/analysis.md): all CPUs at least 90% busy on average, or some task waiting
# for a CPU at least 50% of the time (PSI).
SATURATED_BUSY_RATIO = 0.9
SATURATED_CPU_PRESSURE_PCT = 50.0


def machine_in_window(data: RunData, start_ns: int, end_ns: int) -> str:
    """ "; machine: CPU busy 97%, CPU pressure 52% (saturated: ...)" over (start, end], or ""
    without `host` points there."""
    means = {}
    for name, series in data.host.items():
        values = [v for t, v in series if start_ns < t <= end_ns]
        if values:
            means[name] = sum(values) / len(values)
    busy, pressure = means.get("cpu_busy_ratio"), means.get("cpu_pressure_pct")
    said = [f"CPU busy {busy:.0%}" if busy is not None else ""]
    said.append(f"CPU pressure {pressure:.0f}%" if pressure is not None else "")
    if not any(said):
        return ""
    saturated = (busy is not None and busy >= SATURATED_BUSY_RATIO) or (
        pressure is not None and pressure >= SATURATED_CPU_PRESSURE_PCT
    )
    mark = " (saturated: the window may say more about the machine than the server)"
    return "; machine: " + ", ".join(s for s in said if s) + (mark if saturated else "")


def without_busy_ticks(
    ticks: list[tuple[int, str]], data: RunData, host_busy_max: float | None
) -> tuple[list[tuple[int, str]], int]:
    """The windows (time, latency histogram) whose machine was at most `host_busy_max`
    busy (`criteria.host_busy_max`; a window without a `host` point is kept), and how many
    were left out."""
    busy = dict(data.host.get("cpu_busy_ratio", []))
    if host_busy_max is None or not busy:
        return ticks, 0
    kept = [t for t in ticks if busy.get(t[0], 0.0) <= host_busy_max]
    return kept, len(ticks) - len(kept)
