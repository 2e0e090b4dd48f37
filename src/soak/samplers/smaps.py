"""The `smaps` sampler: the target's RSS, PSS and anonymous bytes by mapping, as `memory_map`.

One point per (kind, path) group of /proc/<pid>/smaps (see soak.smaps): the Go
or malloc heap, thread stacks, each of the top N files by RSS (a SQLite
database, a cache), the libraries, and the rest. A process tree (a server
that forks workers) is summed over its members when `tree` is set.
"""

from __future__ import annotations

from pathlib import Path

from soak.points import Point
from soak.procfs import process_tree, read_smaps
from soak.samplers.base import TargetFn, TargetSectionSampler
from soak.samplers.selection import SmapsSamplerConfig
from soak.smaps import MapGroup, group


def to_points(groups: list[MapGroup], tick_time_ns: int) -> list[Point]:
    return [
        Point(
            "memory_map",
            {"rss_bytes": g.rss_bytes, "pss_bytes": g.pss_bytes, "anon_bytes": g.anon_bytes},
            tick_time_ns,
            {"kind": g.kind, "path": g.path},
        )
        for g in groups
    ]


class SmapsSampler(TargetSectionSampler[SmapsSamplerConfig]):
    name = "smaps"

    def __init__(
        self, cfg: SmapsSamplerConfig, target: TargetFn, *, proc_root: Path = Path("/proc")
    ) -> None:
        super().__init__(cfg, target)
        self.proc_root = proc_root

    def sample(self, tick_time_ns: int) -> list[Point]:
        running = self.target()
        if running is None or running.pid is None:
            return []  # not running: the target sampler records it; no pid: nothing to read
        pid = running.pid
        maps = read_smaps(pid, self.proc_root)  # the main process must be there
        if self.cfg.tree:
            for child in process_tree(pid, self.proc_root)[1:]:
                try:
                    maps += read_smaps(child, self.proc_root)
                except OSError:
                    continue  # a child that exited between listing and reading
        return to_points(group(maps, self.cfg.top_paths), tick_time_ns)
