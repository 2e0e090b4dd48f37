"""The `host` sampler from a /proc laid out under a temporary root."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak import hostproc, procfs
from soak.samplers.host import HostSampler

HZ = procfs.CLOCK_TICKS_PER_S
PRESSURE_CPU = """some avg10=52.92 avg60=61.76 avg300=64.29 total=591268485
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""
PRESSURE_MEMORY = """some avg10=1.50 avg60=0.20 avg300=0.05 total=1234
full avg10=0.75 avg60=0.10 avg300=0.02 total=567
"""


def write_stat(root: Path, user: int, idle: int, iowait: int, steal: int) -> None:
    # user nice system idle iowait irq softirq steal
    (root / "stat").write_text(f"cpu  {user} 0 0 {idle} {iowait} 0 0 {steal} 0 0\ncpu0 1 2 3\n")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "pressure").mkdir()
    (tmp_path / "pressure" / "cpu").write_text(PRESSURE_CPU)
    (tmp_path / "pressure" / "memory").write_text(PRESSURE_MEMORY)
    (tmp_path / "loadavg").write_text("5.25 3.10 1.05 3/280 6061\n")
    write_stat(tmp_path, user=1000, idle=1000, iowait=0, steal=0)
    return tmp_path


def test_parsers() -> None:
    assert hostproc.parse_loadavg("5.25 3.10 1.05 3/280 6061\n") == (5.25, 3.10, 1.05)
    assert hostproc.parse_pressure(PRESSURE_MEMORY)["full_avg10"] == 0.75
    m = hostproc.parse_machine_stat("cpu  10 0 0 20 30 0 0 40 0 0\n")
    assert (m.iowait_s, m.steal_s) == (30 / HZ, 40 / HZ)
    assert m.busy_s == pytest.approx(50 / HZ)  # user + steal; idle and iowait are not busy
    with pytest.raises(ValueError):
        hostproc.parse_pressure("")


def test_shares_since_the_previous_tick(root: Path) -> None:
    clock = iter([0.0, 1.0])
    sampler = HostSampler(proc_root=root, clock=lambda: next(clock), cpus=2)
    (first,) = sampler.sample(1)
    assert "cpu_busy_ratio" not in first.fields  # one reading: no share yet
    assert first.fields["load1"] == 5.25 and first.fields["cpus"] == 2
    assert first.fields["cpu_pressure_pct"] == 52.92
    assert first.fields["memory_pressure_pct"] == 1.5
    # 200 ticks later: 150 user, 20 idle, 10 iowait, 20 steal.
    write_stat(root, user=1150, idle=1020, iowait=10, steal=20)
    (second,) = sampler.sample(2)
    assert second.fields["cpu_busy_ratio"] == pytest.approx(170 / 200)
    assert second.fields["cpu_iowait_ratio"] == pytest.approx(10 / 200)
    assert second.fields["cpu_steal_ratio"] == pytest.approx(20 / 200)
    assert second.fields["generator_cpu_cores"] == pytest.approx(0.0)  # no process in root


def test_a_kernel_without_pressure_is_said_once(root: Path) -> None:
    (root / "pressure" / "cpu").unlink()
    sampler = HostSampler(proc_root=root, cpus=2)
    first = sampler.sample(1)
    assert [p.measurement for p in first] == ["host", "event"]
    assert first[1].tags["kind"] == "host_unreadable"
    assert "pressure/cpu" in str(first[1].fields["message"])
    assert "cpu_pressure_pct" not in first[0].fields
    assert [p.measurement for p in sampler.sample(2)] == ["host"]
