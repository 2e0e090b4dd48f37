"""The `host` sampler on this machine, beside two real CPU hogs (`yes > /dev/null`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from soak.samplers.host import HostSampler
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_two_hogs_make_the_machine_busy_and_the_generator_is_its_own(
    hogs: list[subprocess.Popen[bytes]],
) -> None:
    # The hogs stand in for the load workers: their CPU is the generator's.
    sampler = HostSampler(generator_pids=lambda: [p.pid for p in hogs])
    sampler.sample(0)

    def hogged() -> dict[str, float] | None:
        (point, *_) = sampler.sample(1)
        busy = point.fields.get("cpu_busy_ratio")
        cores = point.fields.get("generator_cpu_cores")
        # Two hogs on a machine shared with other work: the CPUs at least 90% busy, and the
        # hogs (the generator here) counted for a fifth of a core at least over the last
        # second (beside two other hogs, a test run and two replays they got 0.5 at most).
        if isinstance(busy, float) and busy >= 0.9 and isinstance(cores, float) and cores > 0.2:
            return point.fields  # type: ignore[return-value]
        return None

    fields = wait_for(hogged, 20.0, "the CPUs busy and the two hogs' CPU counted", poll_s=1.0)
    assert fields["load1"] > 0
