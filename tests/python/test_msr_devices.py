"""MSR devices named ``host:disk``: ``device="rsrch:0"`` works in
Python wherever ``--device rsrch:0`` works in the CLI. The name is parsed
and resolved by the core; these tests check what reaches the user.

two_hosts.csv: ``hm,0`` at 0 and 20 ms, ``rsrch,0`` at 10, 30 and 40 ms,
each taking 1 ms (response time 10,000 ticks of 100 ns). rsrch:0 alone:
idle 11 -> 30 and 31 -> 40 ms, two intervals of mean 14 ms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fallow

REPO = Path(__file__).resolve().parents[2]
TWO_HOSTS = REPO / "tests" / "data" / "cli" / "two_hosts.csv"
RSRCH0 = 1 << 24  # the second host's disk 0: host index 1 above 24 disk bits


@pytest.fixture(scope="module")
def trace() -> fallow.Trace:
    return fallow.read_trace(TWO_HOSTS)


def test_devices_are_named_and_selected_by_name(trace):
    assert trace.devices() == [
        {"id": 0, "requests": 2, "name": "hm:0"},
        {"id": RSRCH0, "requests": 3, "name": "rsrch:0"},
    ]
    r = trace.select_device("rsrch:0")
    # by hand from the file: rsrch's offsets and directions, in time order
    assert r.offset_bytes.tolist() == [8192, 0, 0]
    assert r.is_write.tolist() == [True, False, False]
    assert set(r.device.tolist()) == {RSRCH0}
    assert len(trace.select_device("hm:0")) == 2
    # the id still works, as a numpy integer too
    assert len(trace.select_device(np.uint32(RSRCH0))) == 3


def test_characterize_by_host_disk(trace):
    c = fallow.characterize(trace, device="rsrch:0")
    assert c["trace"]["requests"] == 3
    assert c["idle"]["count"] == 2
    assert c["idle"]["mean_s"] == pytest.approx(0.014, abs=1e-12)
    assert fallow.characterize(trace, device="hm:0")["trace"]["requests"] == 2


def test_simulate_compare_tune_energy_by_host_disk(trace):
    # the FG requests are rsrch:0's three, not the file's five
    s = fallow.simulate(trace, "aggressive", device="rsrch:0", bg="const:1ms")
    assert s["fg"]["requests"] == 3
    # hm:0 alone: busy 0-1 and 20-21 ms, one idle interval of 19 ms (the
    # rsrch requests between them are another device's)
    c = fallow.compare(trace, ["aggressive"], device="hm:0", bg="const:1ms")
    assert c.iloc[0]["idle_intervals"] == 1
    assert c.iloc[0]["idle_total_s"] == pytest.approx(0.019, abs=1e-12)
    t = fallow.tune(trace, "fixed-wait", "1ms", device="rsrch:0", bg="const:1ms", sizes="4KiB")
    assert t.budget == "1ms"
    e = fallow.energy(trace, device="rsrch:0")
    assert e["input"]["device"] == RSRCH0


def test_a_bad_or_ambiguous_device_is_a_parameter_error(trace):
    # disk 0 is on both hosts
    with pytest.raises(fallow.ParameterError, match="several hosts") as info:
        fallow.characterize(trace, device=0)
    assert "hm:0" in str(info.value) and "rsrch:0" in str(info.value)
    # none given: the error names the devices as host:disk
    with pytest.raises(fallow.ParameterError, match=r"hm:0, rsrch:0"):
        fallow.simulate(trace, "aggressive")
    with pytest.raises(fallow.ParameterError, match="src1:0"):
        fallow.simulate(trace, "aggressive", device="src1:0")
    with pytest.raises(fallow.ParameterError, match="host:disk"):
        trace.select_device("hm:x")
    with pytest.raises(fallow.ParameterError, match="device"):
        fallow.characterize(trace, device=1.5)
    with pytest.raises(fallow.ParameterError, match="not a device id"):
        fallow.characterize(trace, device=-1)
