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
from fallow._options import ParetoOptions, RecommendOptions, TuneOptions, given, keywords

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack

    from fallow._fallow import Trace

__all__ = ["ParetoResult", "Recommendation", "TuneResult", "pareto", "recommend", "tune"]

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


#: Columns of :attr:`ParetoResult.points`, in order.
POINT_COLUMNS = [
    "policy",
    "spec",
    "knob",
    "knob_value",
    "bg_throughput_bytes_per_s",
    "fg_mean_added_delay_s",
    "fg_slowdown",
    "fg_collision_rate",
    "idle_used_fraction",
    "on_front",
    "clairvoyant",
]


class ParetoResult:
    """Each policy's knob swept over its coarse ladder at one request size:
    the data of ``fallow pareto --json`` (a list of fronts, one per policy:
    ``policy``, ``clairvoyant``, ``knob``, ``request_size_bytes``,
    ``points``: every setting, ``front``: the non-dominated ones, least
    delay first)."""

    def __init__(self, fronts: list[dict[str, Any]]):
        self.fronts = fronts

    def __repr__(self) -> str:
        return f"<fallow.ParetoResult {len(self.fronts)} policies>"

    def __getitem__(self, policy: str) -> dict[str, Any]:
        """The front of one policy, by name."""
        for f in self.fronts:
            if f["policy"] == policy:
                return f
        raise KeyError(policy)

    @property
    def points(self) -> pd.DataFrame:
        """Every setting swept, one row each (the columns of ``fallow
        pareto --csv``: :data:`POINT_COLUMNS`); ``on_front`` says whether
        it is on its policy's front."""
        import pandas

        rows = []
        for f in self.fronts:
            front = {p["spec"] for p in f["front"]}
            for p in f["points"]:
                rows.append(
                    [
                        f["policy"],
                        p["spec"],
                        f["knob"],
                        p["knob"],
                        p["bg_throughput_bytes_per_s"],
                        p["fg_mean_added_delay_s"],
                        p["fg_slowdown"],
                        p["fg_collision_rate"],
                        p["idle_used_fraction"],
                        p["spec"] in front,
                        f["clairvoyant"],
                    ]
                )
        return pandas.DataFrame(rows, columns=POINT_COLUMNS)

    def to_json(self, **kwargs: Any) -> str:
        """The fronts as JSON text (as ``fallow pareto --json``)."""
        return _schema.to_json(self.fronts, **kwargs)


@keywords(ParetoOptions)
def pareto(
    trace: Trace | None = None,
    policies: list[str] | None = None,
    **options: Unpack[ParetoOptions],
) -> ParetoResult:
    """Sweep each policy's knob over its coarse ladder (19 waits from 100 µs
    to 100 s for fixed-wait) at one BG request size and keep the settings
    no other beats on both BG throughput and mean added FG delay.

    Args:
        trace: as for :func:`fallow.simulate` (or None with ``workload=``).
        policies: names or specs (``"fixed-wait"``, ``"busy-bee:a=0.5"``:
            the knob is swept, other parameters stay); None: every policy
            that can run under the BG model (one that chooses its request
            sizes needs a model that charges for size, and is left out with
            a ``UserWarning`` saying why).
        bg_size: the request size swept at (default 64 KiB, as
            :func:`fallow.simulate`).
        threads: settings simulated at once (the result does not depend on it).
        html, overwrite: also write ``fallow pareto --html``'s page there,
            as :func:`fallow.compare` writes its page.
        workload, device, service, ...: the input and BG options of
            :func:`fallow.simulate`.

    Returns:
        A :class:`ParetoResult`. Ctrl-C raises ``KeyboardInterrupt`` between
        settings.

    >>> import fallow
    >>> p = fallow.pareto(workload="poisson", arrival_rate=30, service="exp:10ms",
    ...                   requests=3_000, policies=["fixed-wait"])
    >>> front = p["fixed-wait"]["front"]
    >>> delays = [q["fg_mean_added_delay_s"] for q in front]
    >>> delays == sorted(delays)
    True
    """
    return ParetoResult(_fallow.pareto(trace, policies, **given(options)))


#: Columns of :attr:`Recommendation.ranking`: (column, key in a ranking
#: entry or, after ``best.``, in its best setting).
RANKING_COLUMNS: list[tuple[str, str]] = [
    ("rank", "rank"),
    ("policy", "policy"),
    ("spec", "best.spec"),
    ("bg_size_bytes", "best.bg_size_bytes"),
    ("bg_throughput_bytes_per_s", "best.bg_throughput_bytes_per_s"),
    ("fg_mean_added_delay_s", "best.fg_mean_added_delay_s"),
    ("fg_slowdown", "best.fg_slowdown"),
    ("relative", "relative"),
    ("guarantee", "guarantee"),
    ("reason", "reason"),
]


class Recommendation:
    """Every deployable policy with a knob tuned for one FG budget and
    ranked: the data of ``fallow recommend --json`` without the CLI's
    ``reproduce`` commands (``budget_text``, ``sizes``, ``traits``,
    ``ranking``, ``simulations``, ``search``, ``skipped``,
    ``throughput_tolerance``)."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __repr__(self) -> str:
        top = self.best
        what = "no policy does BG work" if top is None else f"best {top['policy']}"
        return f"<fallow.Recommendation within {self.data['budget_text']}: {what}>"

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def best(self) -> dict[str, Any] | None:
        """The top-ranked entry (``rank`` 1), or None when no policy does
        BG work within the budget."""
        ranked = [r for r in self.data["ranking"] if r["rank"] == 1]
        return ranked[0] if ranked else None

    @property
    def ranking(self) -> pd.DataFrame:
        """One row per policy, best first (:data:`RANKING_COLUMNS`); rank 0:
        unranked (no BG work within the budget, or cannot meet it)."""
        import pandas

        rows = [[_cell(r, p) for _, p in RANKING_COLUMNS] for r in self.data["ranking"]]
        return pandas.DataFrame(rows, columns=[c for c, _ in RANKING_COLUMNS])

    def to_json(self, **kwargs: Any) -> str:
        """The recommendation as JSON text."""
        return _schema.to_json(self.data, **kwargs)


@keywords(RecommendOptions)
def recommend(
    trace: Trace | None = None,
    budget: str = "1ms",
    **options: Unpack[RecommendOptions],
) -> Recommendation:
    """Tune every deployable policy with a knob for one FG budget (as
    :func:`fallow.tune`) and rank them by the BG throughput they reach;
    throughputs within 1 % of the best left rank by the lower added delay.

    Args:
        trace: as for :func:`fallow.simulate` (or None with ``workload=``).
        budget: a mean FG slowdown (``"5%"``) or a mean added delay per FG
            request (``"1ms"``).
        sizes: candidate BG request sizes, as for :func:`fallow.tune`;
            default 5 log-spaced from 64 KiB to 4 MiB (as ``fallow
            recommend``).
        max_delay, threads, search: as for :func:`fallow.tune`.
        workload, device, service, ...: the input and BG options of
            :func:`fallow.simulate`.

    Returns:
        A :class:`Recommendation`. Ctrl-C raises ``KeyboardInterrupt``
        within one batch of settings.

    >>> import fallow
    >>> r = fallow.recommend(workload="poisson", arrival_rate=30, service="exp:10ms",
    ...                      requests=3_000, budget="1ms", sizes="256KiB",
    ...                      bg="size:base=4ms,knee=64KiB,rate=100MB")
    >>> r.best["best"]["fg_mean_added_delay_s"] <= 0.001
    True
    """
    return Recommendation(_fallow.recommend(trace, budget, **given(options)))
