"""Ctrl-C interrupts a long `fallow.tune` call (issue 11): the call releases
the GIL and checks Python's signals every 50 ms while the core searches, so
SIGINT raises KeyboardInterrupt promptly instead of after the search."""

import os
import signal
import threading
import time

import pytest

fallow = pytest.importorskip("fallow")


def test_sigint_interrupts_a_long_tune_within_two_seconds():
    sent = {}

    def interrupt():
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        # the exact search of a 300k-request workload over 30 sizes takes
        # far longer than the bound below
        fallow.tune(
            policy="fixed-wait",
            budget="1ms,2ms,4ms",
            workload="poisson",
            utilization=0.3,
            requests=300_000,
            bg="size:base=8ms,knee=64KiB,rate=100MB",
            threads=1,
        )
    done = time.monotonic()
    timer.cancel()
    assert "at" in sent, "the call ended before the signal was sent"
    latency = done - sent["at"]
    print(f"interrupted {latency * 1e3:.0f} ms after SIGINT ({done - start:.2f} s in all)")
    assert latency < 2.0, f"KeyboardInterrupt came {latency:.2f} s after SIGINT"
