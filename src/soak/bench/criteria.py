"""`bench.criteria` judged on a bench result (the JSON dict): pure."""

from __future__ import annotations

from typing import Any

from soak.config.bench import BenchCriteria


def _limit_for(limits: dict[str, float], name: str) -> float | None:
    return limits.get(name, limits.get("all"))


def evaluate(classes: list[dict[str, Any]], crit: BenchCriteria) -> list[dict[str, Any]]:
    """One entry per criterion and class: {name, ok, message}."""
    out: list[dict[str, Any]] = []

    def add(name: str, ok: bool, message: str) -> None:
        out.append({"name": name, "ok": ok, "message": message})

    for row in classes:
        cls = row["name"]
        floor = _limit_for(crit.capacity_qps_min, cls)
        sat = row.get("saturation")
        if floor is not None and sat is not None:
            got = sat["qps"]["median"]
            add(f"capacity {cls}", got >= floor, f"median {got:,.0f} q/s, floor {floor:,.0f}")
        floor = _limit_for(crit.knee_qps_min, cls)
        knee = row.get("knee")
        if floor is not None and knee is not None:
            got = knee["within_slo_qps"]
            add(f"knee {cls}", got >= floor, f"within SLO {got:,.0f} q/s, floor {floor:,.0f}")
        p99_max = _limit_for(crit.fixed_p99_ms_max, cls)
        for run in row.get("fixed", []):
            rate = run["offered_qps"]
            p99 = run["latency_ms"].get("p99")
            if p99_max is not None:
                ok = p99 is not None and p99 <= p99_max
                add(f"p99 {cls} @ {rate:g} q/s", ok, f"p99 {p99} ms, max {p99_max} ms")
            if crit.lost_ratio_max is not None:
                ratio = run["lost_ratio"]
                ok = ratio <= crit.lost_ratio_max
                add(
                    f"lost {cls} @ {rate:g} q/s",
                    ok,
                    f"{ratio:.4%} lost, max {crit.lost_ratio_max:.4%}",
                )
    return out
