"""Methods of :class:`fallow.Trace` that only change units or shape, kept
in Python so the compiled core has one method per computation: the
seconds variants of ``span_ns``, ``idle_intervals_ns`` and
``busy_periods_ns``, ``columns`` and the ``repr``. ``fallow/__init__.py``
attaches them to the class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from fallow._fallow import Trace


def idle_intervals(
    self: Trace, service: str | None = None, seed: int = 1, device: int | None = None
) -> npt.NDArray[np.float64]:
    """Idle interval lengths in seconds (float64), in time order, of one
    device: ``device``, which a trace of several devices requires (their
    periods merged into one timeline would describe no device).

    Exact from the recorded completions; with ``service`` (``exp:5ms``,
    ``const:1ms``, ``disk``) completions come from that model and a FCFS
    queue seeded by ``seed`` (required for traces without completions)."""
    return self.idle_intervals_ns(service, seed, device) / 1e9


def busy_periods(
    self: Trace, service: str | None = None, seed: int = 1, device: int | None = None
) -> dict[str, Any]:
    """Busy periods as a dict of arrays: ``start_s``, ``length_s`` (float64)
    and ``requests`` (uint32, requests arriving in each). See
    ``idle_intervals``."""
    p = self.busy_periods_ns(service, seed, device)
    return {
        "start_s": p["start_ns"] / 1e9,
        "length_s": p["length_ns"] / 1e9,
        "requests": p["requests"],
    }


def columns(self: Trace) -> dict[str, Any]:
    """All columns as a dict of numpy arrays (``completion_ns`` is None
    without completions)."""
    names = ("arrival_ns", "completion_ns", "offset_bytes", "size_bytes", "is_write", "device")
    return {name: getattr(self, name) for name in names}


def span_s(self: Trace) -> float:
    """From the first arrival to the last arrival or completion, seconds."""
    return self.span_ns / 1e9


def trace_repr(self: Trace) -> str:
    """``<fallow.Trace 5 requests, 1 device, 0.004 s, msr, with completions>``."""
    n, d = len(self), len(self.devices())
    return (
        f"<fallow.Trace {n} request{'' if n == 1 else 's'}, {d} device{'' if d == 1 else 's'}, "
        f"{self.span_s:.3f} s, {self.report.get('format') or 'columns'}"
        f"{', with completions' if self.has_completions else ''}>"
    )
