"""The text summary of a load run, laid out like dnsperf's "Statistics" block."""

from __future__ import annotations

from soak.load.stats import LoadResult


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.2f}%" if total else "0.00%"


def _lat(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_summary(r: LoadResult, server: str) -> str:
    lines = [
        f"Load ({r.engine} engine) against {server}",
        "",
        "Statistics:",
        "",
        f"  Queries sent:         {r.sent}",
        f"  Queries completed:    {r.completed} ({_pct(r.completed, r.sent)})",
        f"  Queries lost:         {r.lost} ({_pct(r.lost, r.sent)})",
        f"  Late replies:         {r.late} (after the timeout; counted lost, not timed)",
    ]
    if r.abandoned:
        lines.append(
            f"  Queries abandoned:    {r.abandoned} ({_pct(r.abandoned, r.sent)}; in flight when "
            "the client hung up)"
        )
    lines.append("")
    codes = ", ".join(f"{k} {n} ({_pct(n, r.completed)})" for k, n in r.rcodes.items())
    lines.append(f"  Response codes:       {codes or '-'}")
    lines.append(f"  Run time (s):         {r.duration_s:.3f}")
    target = "flat out" if r.target_rate <= 0 else f"{r.target_rate:g} q/s"
    lines.append(f"  Target rate:          {target}, achieved {r.achieved_rate:.2f} q/s sent")
    lines.append(f"  Queries per second:   {r.qps:.2f}")
    lines.append("")
    lat = r.latency_ms
    lines.append(
        f"  Latency (ms):         avg {_lat(lat['avg'])} min {_lat(lat['min'])} "
        f"max {_lat(lat['max'])} stddev {_lat(lat['stddev'])}"
    )
    lines.append(
        f"  Percentiles (ms):     p50 {_lat(lat['p50'])} p95 {_lat(lat['p95'])} "
        f"p99 {_lat(lat['p99'])} p99.9 {_lat(lat['p999'])}"
    )
    if r.connections is not None:
        c, hs = r.connections, r.connections["handshake_ms"]
        lines.append(
            f"  Connections:          opened {c['opened']} errors {c['errors']} "
            f"TLS resumed {c['tls_resumed']} hung up {c['hung_up']}, "
            f"handshake p50 {_lat(hs['p50'])} "
            f"p99 {_lat(hs['p99'])} max {_lat(hs['max'])} ms"
        )
    if r.classes:
        lines += ["", "Classes:", ""]
        for name, c in r.classes.items():
            cl = c["latency_ms"]
            lines.append(
                f"  {name:<12} sent {c['sent']} completed {c['completed']} lost {c['lost']} "
                f"wrong {c['wrong_answers']} p50 {_lat(cl['p50'])} p99 {_lat(cl['p99'])} ms"
            )
    lines.append("")
    if r.generator_bound:
        lines.append(
            f"  GENERATOR BOUND: sent {r.achieved_rate:.2f} of {r.target_rate:g} q/s; "
            "the figures describe the generator, not the server (add --workers)"
        )
    for note in r.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines).rstrip() + "\n"
