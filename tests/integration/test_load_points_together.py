"""A window's `load` points are one sum: its `all` row is the merge of its class rows,
counts and latency histogram alike, even when the sampler's take runs late beside the
run's last take (the tick runner does not wait for a sampler still running when the run
ends). Real windows from a real unbound, taken by two threads at once."""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.histogram import LatencyHistogram, merged
from soak.load.generator import LoadRunner
from soak.load.ledger import Window
from soak.load.load_config import LoadConfig
from soak.load.supervised import SupervisedLoad
from soak.names import LAT_HIST_FIELD
from soak.points import Point
from tests.support.agents import hit_miss_mix
from tests.support.servers import unbound

pytestmark = pytest.mark.integration

COPIES = 400  # of each real window, taken by two threads at once


def real_windows(tmp_path: Path) -> tuple[SupervisedLoad, list[Window]]:
    """A 3-s load of two classes against unbound, its closed windows (with answers)."""
    cfg = LoadConfig.model_validate({"rate_qps": 400, "seed": 7, "mix": hit_miss_mix()})
    with unbound(tmp_path) as server:
        load = SupervisedLoad(LoadRunner(cfg, ("127.0.0.1", server.port), base_dir=tmp_path))
        load.start(400, 3)
        load.runner.wait(60)
        load.stop()
    windows = [w for w in load.runner.take_ledger() if w.total().completed]
    assert windows, "no window with answers"
    return load, windows


def groups(points: list[Point]) -> Iterator[list[Point]]:
    """A window's points: its `all` point first, then its classes' (supervised.load_points)."""
    group: list[Point] = []
    for p in points:
        if p.tags.get("class") == "all" and group:
            yield group
            group = []
        group.append(p)
    if group:
        yield group


def test_a_windows_all_row_is_the_merge_of_its_classes_under_two_takers(
    tmp_path: Path,
) -> None:
    load, windows = real_windows(tmp_path)
    taken: list[list[Point]] = [[], []]
    queue = [copy.deepcopy(w) for _ in range(COPIES) for w in windows]

    def taker(i: int) -> None:
        while True:
            with lock:
                if not queue:
                    return
                # As the runner's reader adds a closed window: under the runner's lock,
                # which its take_ledger swaps the list under (unlocked, an append could
                # land in a list the other taker had already taken, and be lost).
                with load.runner._lock:
                    load.runner.ledger.append(queue.pop())
            taken[i] += load.take_points(0)

    lock = threading.Lock()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as a busy machine makes them
    try:
        threads = [threading.Thread(target=taker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    wrong = []
    completed = 0.0
    for group in groups(taken[0] + taken[1]):
        whole, parts = group[0], group[1:]
        completed += whole.fields["completed"]
        hist = LatencyHistogram.decode(str(whole.fields.get(LAT_HIST_FIELD, "")))
        union = merged(
            LatencyHistogram.decode(str(p.fields[LAT_HIST_FIELD]))
            for p in parts
            if LAT_HIST_FIELD in p.fields
        )
        if hist != union or hist.total != whole.fields["completed"]:
            wrong.append((hist.total, union.total, whole.fields["completed"]))
        if sum(p.fields["completed"] for p in parts) != whole.fields["completed"]:
            wrong.append(("counts", whole.fields["completed"]))
    assert wrong == [], f"{len(wrong)} windows: {wrong[:5]}"
    # and every window handed out once: none lost between the two takers
    assert completed == COPIES * sum(w.total().completed for w in windows)
