"""Tuning a policy for an FG budget: :func:`tune`.

The most BG throughput a policy gets without costing the foreground more
than a budget: for each candidate BG request size, the policy's
aggressiveness knob (the wait of ``fixed-wait``, T of the estimate
policies, …) is searched for the most aggressive setting within the
budget, and the size with the most throughput wins (Practical Scrubbing
§V-C/D). The search runs in Rust with the GIL released; the result has the
keys of ``fallow tune --json`` (without the CLI's ``input`` and
``reproduce`` entries), and every figure in it is a run of
:func:`fallow.simulate` with the reported spec and size.

>>> import fallow
>>> options = dict(workload="poisson", arrival_rate=30, service="exp:10ms",
...                requests=5_000, bg="size:base=4ms,knee=64KiB,rate=100MB")
>>> t = fallow.tune(policy="fixed-wait", budget="1ms",
...                 sizes="64KiB,256KiB,1MiB", **options)
>>> t.best["fg_mean_added_delay_s"] <= 0.001
True
>>> list(t.sizes["request_size_bytes"])
[65536, 262144, 1048576]
>>> r = fallow.simulate(policy=t.best["spec"], bg_size=t.best["bg_size_bytes"], **options)
>>> r.bg_throughput_bytes_per_s == t.best["bg_throughput_bytes_per_s"]
True
>>> tight, loose = fallow.tune(policy="fixed-wait", budget="0.5ms,2ms",
...                            sizes="64KiB,256KiB,1MiB", **options)
>>> tight.budget, loose.budget
('500us', '2ms')
>>> bool(tight.best["bg_throughput_bytes_per_s"] < loose.best["bg_throughput_bytes_per_s"])
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fallow import _fallow, _schema
from fallow._options import TuneOptions, given, keywords

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack

    from fallow._fallow import Trace

__all__ = ["TuneResult", "tune"]

#: Columns of :attr:`TuneResult.sizes`, in order: (column, key in a size row
#: or, after ``best.``, in its best setting).
SIZE_COLUMNS: list[tuple[str, str]] = [
    ("request_size_bytes", "request_size_bytes"),
    ("single_request_delay_s", "single_request_delay_s"),
    ("status", "status"),
    ("spec", "best.spec"),
    ("knob", "best.knob"),
    ("bg_throughput_bytes_per_s", "best.bg_throughput_bytes_per_s"),
    ("fg_mean_added_delay_s", "best.fg_mean_added_delay_s"),
    ("fg_slowdown", "best.fg_slowdown"),
    ("fg_collision_rate", "best.fg_collision_rate"),
    ("steps", "steps"),
]


def _cell(row: dict[str, Any], path: str) -> Any:
    if path.startswith("best."):
        best = row["best"]
        return None if best is None else best[path[5:]]
    return row[path]


class TuneResult:
    """The answer for one budget (the JSON of ``fallow tune --json``).

    Attributes:
        data: the plain result: ``policy``, ``knob`` (the parameter searched,
            its range and direction, or None), ``max_delay_s``, ``budget``
            (``kind`` ``added_delay`` with ``ns``, or ``slowdown`` with
            ``fraction``), ``budget_text``, ``best``, ``sizes`` (one entry per
            candidate size: ``request_size_bytes``, ``single_request_delay_s``,
            ``status`` ``ok``/``infeasible``/``excluded``, its ``best``,
            ``steps``), ``baseline`` (the kernel idle class at 64 KiB) and
            ``simulations``. A setting (``best``, ``baseline``) has
            ``policy``, ``spec``, ``params``, ``request_size_bytes``,
            ``bg_size_bytes``, ``bg_throughput_bytes_per_s``,
            ``fg_mean_added_delay_s``, ``fg_slowdown``, ``fg_collision_rate``
            and ``knob``.
    """

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __repr__(self) -> str:
        b = self.best
        if b is None:
            return f"<fallow.TuneResult {self.data['policy']} within {self.budget}: no setting>"
        return (
            f"<fallow.TuneResult {self.data['policy']} within {self.budget}: {b['spec']} "
            f"at {b['request_size_bytes']} B, BG {b['bg_throughput_bytes_per_s'] / 1e6:.3g} MB/s>"
        )

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def budget(self) -> str:
        """The budget as written back (``"1ms"``, ``"5%"``)."""
        return self.data["budget_text"]

    @property
    def best(self) -> dict[str, Any] | None:
        """The best setting over all sizes (None: no setting meets the budget).

        Simulating ``policy=best["spec"]`` with ``bg_size=best["bg_size_bytes"]``
        and the same input and BG options reproduces its figures exactly.
        """
        return self.data["best"]

    @property
    def baseline(self) -> dict[str, Any]:
        """The OS's idle I/O class at its defaults and 64 KiB requests, for comparison."""
        return self.data["baseline"]

    @property
    def sizes(self) -> pd.DataFrame:
        """One row per candidate request size, in increasing order:
        ``request_size_bytes``, ``single_request_delay_s``, ``status``, and
        the best setting at that size (``spec``, ``knob``,
        ``bg_throughput_bytes_per_s``, ``fg_mean_added_delay_s``,
        ``fg_slowdown``, ``fg_collision_rate``; missing where ``status`` is
        not ``ok``), then ``steps`` (simulations the search took)."""
        import pandas

        rows = [[_cell(r, p) for _, p in SIZE_COLUMNS] for r in self.data["sizes"]]
        return pandas.DataFrame(rows, columns=[c for c, _ in SIZE_COLUMNS])

    def to_json(self, **kwargs: Any) -> str:
        """The result as JSON text."""
        return _schema.to_json(self.data, **kwargs)


@keywords(TuneOptions)
def tune(
    trace: Trace | None = None,
    policy: str = "",
    budget: str = "1ms",
    **options: Unpack[TuneOptions],
) -> TuneResult | list[TuneResult]:
    """Tune a policy's knob and BG request size for the most BG throughput
    within an FG budget.

    Args:
        trace: as for :func:`fallow.simulate` (or None with ``workload=``).
        policy: ``"NAME[:k=v,...]"``: the policy whose knob and request size
            are searched; parameters given stay fixed (and must not be the
            knob or the size).
        budget: a mean FG slowdown (``"5%"``) or a mean delay added to each
            FG request (``"1ms"``); several, comma-separated
            (``"1ms,2ms,4ms"``), are tuned together, sharing simulations.
        sizes: candidate BG request sizes: ``"LO..HI"`` (30 log-spaced),
            ``"LO..HI/N"``, ``"64KiB,1MiB"``, bytes, or a list of sizes;
            default ``"64KiB..4MiB"``.
        max_delay: most delay one BG request may add to an FG request
            (seconds or ``"50ms"``): larger sizes are excluded.
        threads: sizes simulated at once (default ``$FALLOW_THREADS`` or the
            number of cores; the result does not depend on it).
        search: ``"exact"`` (the whole knob ladder: provably best, slow on
            long traces), ``"coarse"`` (1-2-5 grid plus bisection, a
            heuristic between grid points) or ``"auto"`` (exact when its
            estimated cost is about 10 s or less); applies to fixed-wait,
            lossless-waiting and oracle, the others are always coarse. The
            result's ``guarantee`` says which ran.
        workload: as for :func:`fallow.simulate`.
        device, service, arrival_rate, ...: the input and BG options of :func:`fallow.simulate`
            (``device``, ``service``, ``arrival_rate``, ``utilization``,
            ``requests``, ``request_size``, ``write_fraction``, ``bg``,
            ``bg_size``, ``bg_work``, ``switch_penalty``, ``seed``).

    Returns:
        A :class:`TuneResult` for one budget, a list of them (in the order
        given) for several.

    Raises:
        ParameterError: an unknown policy, a bad budget, size or option.
    """
    data = _fallow.tune(trace, policy, budget, **given(options))
    if isinstance(data, list):
        return [TuneResult(d) for d in data]
    return TuneResult(data)
