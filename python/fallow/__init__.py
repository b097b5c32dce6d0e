"""fallow: put a storage device's idle time to work.

Read a block trace, find its busy periods and idle intervals, and
characterise idleness the way the idle-time scheduling literature does.
Traces are columns of numpy arrays; results are plain data plus pandas
frames; plots (``fallow.plots``) need matplotlib.

>>> import fallow
>>> trace = fallow.synthetic(arrival="poisson", rate=50, requests=10_000,
...                          service="exp:5ms", seed=7)
>>> len(trace), trace.has_completions
(10000, True)
>>> idle = trace.idle_intervals()          # seconds, float64
>>> bool(abs(idle.mean() - 1 / 50) < 0.002)  # M/M/1: idle ~ Exp(λ)
True
>>> c = fallow.characterize(trace)
>>> round(c.data["utilization"], 2)
0.25

Simulating background work in the idle time (``fallow.sim``):

>>> r = fallow.simulate(trace, policy="fixed-wait:t=20ms", bg="exp:5ms")
>>> r["fg"]["requests"], 0 < r.slowdown < 1
(10000, True)

Tuning a policy for an FG budget (``fallow.tune``): the most BG throughput
within a mean added delay of 1 ms, over two request sizes:

>>> t = fallow.tune(trace, policy="fixed-wait", budget="1ms", sizes="64KiB,256KiB",
...                 bg="size:base=4ms,knee=64KiB,rate=100MB")
>>> t.best["fg_mean_added_delay_s"] <= 0.001, len(t.sizes)
(True, 2)

Disk spin-down and SARD (peers serving requests while the disk sleeps)
in simulation, the figures of ``fallow energy --json`` (``fallow.power``):

>>> e = fallow.energy(trace, policy="timeout:t=10ms", local_fraction=[1, 0.1])
>>> list(e.runs["setting"])
['100 % local', '10 % local']

Sweeping policies × budgets over many trace files in parallel (local
processes, Dask or Ray) into one frame: ``fallow.fleet.sweep`` (see
``docs/fleet.md``).

Reading a file (format detected, gzip transparent):

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.csv")
>>> with open(path, "w") as f:
...     _ = f.write("128166372003061629,hm,0,Read,3154152960,32768,1500\\n"
...                 "128166372016382155,hm,0,Write,3154152960,4096,500\\n")
>>> t = fallow.read_trace(path)
>>> t.report["format"], len(t), t.idle_intervals_ns().tolist()  # (16382155-3061629-1500)*100 ns
('msr', 2, [1331902600])
"""

from __future__ import annotations

import os
from typing import Any

from fallow import _trace, fleet, io, live
from fallow._fallow import SCHEMA_VERSION as SCHEMA_VERSION
from fallow._fallow import FallowError, ParameterError, Trace, TraceFormatError, synthetic
from fallow._fallow import __version__ as __version__
from fallow._fallow import analyze as _analyze
from fallow._fallow import analyze_all_devices as _analyze_all_devices
from fallow._fallow import characterize as _characterize
from fallow._fallow import read_trace as _read_trace
from fallow.analysis import Characterization
from fallow.errors import MissingExtraError
from fallow.power import EnergyResult, energy
from fallow.sim import SimulationResult, compare, policies, simulate
from fallow.tuning import ParetoResult, Recommendation, TuneResult, pareto, recommend, tune

__all__ = [
    "SCHEMA_VERSION",
    "Characterization",
    "EnergyResult",
    "FallowError",
    "MissingExtraError",
    "ParameterError",
    "ParetoResult",
    "Recommendation",
    "SimulationResult",
    "Trace",
    "TraceFormatError",
    "TuneResult",
    "analyze",
    "analyze_all_devices",
    "characterize",
    "compare",
    "energy",
    "fleet",
    "live",
    "from_columns",
    "pareto",
    "policies",
    "read_trace",
    "recommend",
    "simulate",
    "synthetic",
    "to_parquet",
    "tune",
]

from_columns = Trace.from_columns
# Frame constructors live in fallow.io (pandas/polars are optional there)
# and are offered on Trace as well, as the class's other constructors are.
Trace.from_pandas = staticmethod(io.from_pandas)
Trace.from_polars = staticmethod(io.from_polars)
to_parquet = io.to_parquet
# Unit and shape conversions of the core's methods (fallow/_trace.py).
Trace.idle_intervals = _trace.idle_intervals
Trace.busy_periods = _trace.busy_periods
Trace.columns = _trace.columns
Trace.span_s = property(_trace.span_s)
Trace.__repr__ = _trace.trace_repr


def read_trace(
    path: str | os.PathLike,
    format: str | None = None,
    skip_bad: bool = False,
    time_unit: str | None = None,
    offset_unit_bytes: int | None = None,
    size_unit_bytes: int | None = None,
    completion_column: bool = False,
) -> Trace:
    """Read a block trace file into a :class:`Trace`.

    Args:
        path: the file; gzip-compressed files are read transparently. A
            ``.parquet`` file (see :func:`fallow.io.to_parquet`) is read
            through polars.
        format: force a format instead of detecting it: ``msr``, ``spc``,
            ``hp-srt``, ``blkparse``, ``blktrace``, ``biosnoop``,
            ``bpftrace``, ``fio-iolog``, ``fio-lat``, ``vscsi``, ``plain``,
            ``fallow`` or ``parquet`` (docs/formats.md).
        skip_bad: count and skip malformed records (see ``trace.report``)
            instead of raising :class:`TraceFormatError` on the first.
        time_unit: unit of the ``plain`` format's time column
            (``ns``, ``us``, ``ms`` (default), ``s``).
        offset_unit_bytes: bytes per unit of the ``plain`` offset column (1, or 512 for sectors).
        size_unit_bytes: bytes per unit of the ``plain`` size column.
        completion_column: read a sixth ``plain`` column as each request's
            completion time (same unit and clock as the time column).

    Raises:
        TraceFormatError: a malformed record (with ``.path``, ``.line`` or
            ``.offset``, ``.field``), an empty file or an unknown format.
        ParameterError: an unknown format or unit name.
        OSError: the file cannot be opened or read.

    The file is parsed in Rust with the GIL released.
    """
    if format == "parquet" or (format is None and os.fspath(path).endswith(".parquet")):
        return io.read_parquet(path)
    return _read_trace(
        path,
        format=format,
        skip_bad=skip_bad,
        time_unit=time_unit,
        offset_unit_bytes=offset_unit_bytes,
        size_unit_bytes=size_unit_bytes,
        completion_column=completion_column,
    )


def characterize(
    trace: Trace,
    device: int | str | None = None,
    service: str | None = None,
    seed: int = 1,
    **options: Any,
) -> Characterization:
    """Characterise the idleness of one device's trace.

    Args:
        trace: the trace.
        device: the device to analyse (required when the trace holds several):
            an id, or an MSR ``"host:disk"`` name such as ``"hm:0"``.
        service: a service model (``exp:5ms``, ``const:1ms``, ``disk``) to
            derive completions for traces without them (or to replace
            recorded ones).
        seed: seed of the service model's random stream.
        **options: ``acf_max_lag`` (50), ``ar_max_order`` (10),
            ``rate_bin_s`` (chosen from the span), ``curve_points`` (200);
            at most 10,000, 1,000 and 100,000 lags, orders and points
            (more is a ``ParameterError`` naming the option), and a
            ``rate_bin_s`` giving more than 10,000 bins is widened.

    Returns:
        A :class:`Characterization`: ``.data`` holds the plain result (the
        JSON of ``fallow analyze``), its properties the curves as DataFrames.

    The analysis runs in Rust with the GIL released.
    """
    return Characterization(_characterize(trace, device, service, seed, **options))


def analyze(
    trace: Trace,
    device: int | str | None = None,
    service: str | None = None,
    seed: int = 1,
    html: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """What ``fallow analyze --json`` prints: the characterisation of one
    device and its headline findings.

    Args:
        trace: the trace.
        device: the device to analyse (an id, or an MSR ``"host:disk"``
            name); by default the busiest (the lowest id on a tie), as the
            CLI chooses.
        service, seed, **options: as :func:`characterize`'s.
        html: also write ``fallow analyze --html``'s report to this path:
            the CLI's page, byte for byte, written atomically. The path is
            checked as the CLI checks it, before the analysis: never the
            trace's own file or a device node, and not a file fallow did
            not write unless ``overwrite`` (a ``ParameterError`` naming
            ``html`` otherwise).
        overwrite: let ``html`` replace a file fallow did not write.

    Returns:
        A plain dict: the keys of :func:`characterize`'s ``.data`` and
        ``findings``, a list of ``{"topic": ..., "text": ...}``, most
        important first (``fallow.Characterization(result)`` gives the
        curves as DataFrames).

    The analysis runs in Rust with the GIL released.
    """
    return _analyze(trace, device, service, seed, html=html, overwrite=overwrite, **options)


def analyze_all_devices(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    skip_bad: bool = False,
    service: str | None = None,
    seed: int = 1,
    html: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """What ``fallow analyze PATH --device all --json`` prints: every
    device of a multi-device trace file in one streaming pass (nothing of
    the file is kept in memory), one row each.

    Args:
        path: the trace file (a fleet trace of many devices; each device's
            requests in arrival order, as in the MSR and Alibaba files).
        format, skip_bad: as for :func:`read_trace`.
        service: model completions with this service model (``"exp:5ms"``,
            ``"disk"``) instead of the file's own.
        seed: seed of the service model.
        html: also write ``fallow analyze --device all --html``'s page
            there: the CLI's page, byte for byte, the path checked as for
            :func:`analyze`.
        overwrite: let ``html`` replace a file fallow did not write.

    Returns:
        A plain dict: ``devices``, one row per device (``id``, ``name``,
        ``requests``, ``utilization``, ``idle_mean_s``, ``idle_cv``, …),
        and the file's totals.

    The pass runs in Rust with the GIL released.
    """
    return _analyze_all_devices(
        path,
        format=format,
        skip_bad=skip_bad,
        service=service,
        seed=seed,
        html=html,
        overwrite=overwrite,
    )
