"""Simulating background-work policies: :func:`simulate`, :func:`compare`, :func:`policies`.

The simulator runs in Rust with the GIL released. A run takes FG requests
from a trace (one device) or from a synthetic workload, and a policy that
decides when BG work runs in idle time; it reports what the BG work cost
the foreground and what it got done, with the keys of ``fallow simulate
--json``.

>>> import fallow
>>> r = fallow.simulate(workload="poisson", arrival_rate=30, service="exp:10ms",
...                     requests=20_000, policy="fixed-wait:t=50ms", bg="exp:5ms")
>>> r["policy"], r["fg"]["requests"]
('fixed-wait', 20000)
>>> 0 < r.slowdown < 1
True
>>> frame = fallow.compare(workload="poisson", arrival_rate=30, requests=20_000,
...                        policies=["aggressive", "fixed-wait:t=50ms"])
>>> list(frame["policy"])
['aggressive', 'fixed-wait:t=50ms']
>>> bool(frame.loc[0, "slowdown"] > frame.loc[1, "slowdown"])  # waiting delays FG less
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fallow import _fallow, _schema
from fallow._options import CompareOptions, SimulateOptions, given, keywords

if TYPE_CHECKING:
    import pandas as pd
    from typing_extensions import Unpack

    from fallow._fallow import Trace

__all__ = ["SimulationResult", "compare", "policies", "simulate"]

#: Columns of :func:`compare`'s frame, in order: (column, path in the result).
COLUMNS: list[tuple[str, str]] = [
    ("policy", "spec"),
    ("name", "policy"),
    ("clairvoyant", "clairvoyant"),
    ("slowdown", "fg.slowdown"),
    ("mean_added_delay_s", "fg.mean_added_delay_s"),
    ("mean_response_s", "fg.mean_response_s"),
    ("baseline_mean_response_s", "fg.baseline_mean_response_s"),
    ("p50_response_s", "fg.p50_response_s"),
    ("p90_response_s", "fg.p90_response_s"),
    ("p99_response_s", "fg.p99_response_s"),
    ("p999_response_s", "fg.p999_response_s"),
    ("collision_rate", "fg.collision_rate"),
    ("delayed_requests", "fg.delayed_requests"),
    ("collisions", "fg.collisions"),
    ("bg_completed", "bg.completed"),
    ("bg_bytes", "bg.bytes"),
    ("bg_throughput_bytes_per_s", "bg.throughput_bytes_per_s"),
    ("bg_mean_response_s", "bg.mean_response_s"),
    ("bg_busy_s", "bg.busy_s"),
    ("utilization", "utilization"),
    ("idle_used_fraction", "idle_used_fraction"),
    ("idle_total_s", "idle_total_s"),
    ("idle_intervals", "idle_intervals"),
]


def _get(data: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        data = data[key]
    return data


def _pd():
    import pandas

    return pandas


class SimulationResult:
    """The result of one run (the JSON of ``fallow simulate``).

    Attributes:
        data: the plain result: ``spec``, ``policy``, ``clairvoyant``, ``fg``
            (response times, slowdown, collisions, CCDFs), ``bg`` (requests,
            bytes, throughput, response time), ``utilization``,
            ``idle_used_fraction``, ``idle_total_s``, ``idle_intervals``, ``span_s``.
    """

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __repr__(self) -> str:
        fg, bg = self.data["fg"], self.data["bg"]
        return (
            f"<fallow.SimulationResult {self.data['spec']}: slowdown {fg['slowdown']:.3g}, "
            f"added delay {fg['mean_added_delay_s']:.3g} s, "
            f"BG {bg['throughput_bytes_per_s'] / 1e6:.3g} MB/s>"
        )

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def slowdown(self) -> float:
        """Relative FG slowdown: mean response time with BG work over without, minus one."""
        return self.data["fg"]["slowdown"]

    @property
    def mean_added_delay_s(self) -> float:
        """Mean delay BG work added to each FG request, seconds."""
        return self.data["fg"]["mean_added_delay_s"]

    @property
    def bg_throughput_bytes_per_s(self) -> float:
        """BG bytes completed per second of the trace."""
        return self.data["bg"]["throughput_bytes_per_s"]

    def row(self) -> dict[str, Any]:
        """The headline numbers as one flat dict (a row of :func:`compare`)."""
        return {col: _get(self.data, path) for col, path in COLUMNS}

    @property
    def knob_history(self) -> pd.DataFrame:
        """A re-tuned run's knob over time (``retune=``): ``time_s``,
        ``intervals`` (idle intervals seen), ``knob`` (as written), ``value``
        (ns for durations) and ``early`` (a refit called by a change); empty
        for a run without ``retune``."""
        rows = [
            {
                "time_s": p["time_s"],
                "intervals": p["intervals"],
                "knob": p["knob"],
                "value": p["value"],
                "early": bool(p["fit"] and p["fit"]["early"]),
            }
            for p in (self.data.get("retune") or {}).get("history", [])
        ]
        return _pd().DataFrame(rows, columns=["time_s", "intervals", "knob", "value", "early"])

    @property
    def parts(self) -> pd.DataFrame:
        """A ``then=`` run's figures for each trace over its own span (the
        gap belongs to the second): ``source``, ``requests``, ``span_s``,
        ``baseline_mean_response_s``, ``mean_added_delay_s``, ``slowdown``,
        ``delayed_requests``, ``collisions``, ``bg_bytes``,
        ``bg_throughput_bytes_per_s``; empty for a run without ``then``."""
        columns = [
            "source",
            "requests",
            "span_s",
            "baseline_mean_response_s",
            "mean_added_delay_s",
            "slowdown",
            "delayed_requests",
            "collisions",
            "bg_bytes",
            "bg_throughput_bytes_per_s",
        ]
        return _pd().DataFrame(self.data.get("parts") or [], columns=columns)

    @property
    def ccdf(self) -> pd.DataFrame:
        """FG response-time CCDF with BG work: ``response_s``, ``p_greater``."""
        return _pd().DataFrame(self.data["fg"]["ccdf"], columns=["response_s", "p_greater"])

    @property
    def baseline_ccdf(self) -> pd.DataFrame:
        """The same without BG work."""
        return _pd().DataFrame(
            self.data["fg"]["baseline_ccdf"], columns=["response_s", "p_greater"]
        )

    def to_json(self, **kwargs: Any) -> str:
        """The result as JSON text (the schema of ``fallow simulate --json``)."""
        return _schema.to_json(self.data, **kwargs)


@keywords(SimulateOptions)
def simulate(
    trace: Trace | None = None, policy: str = "", **options: Unpack[SimulateOptions]
) -> SimulationResult:
    """Simulate one BG policy on a trace or a synthetic workload.

    Args:
        trace: a :class:`fallow.Trace` (one device is simulated: pass
            ``device=`` when it holds several), or None with ``workload=``.
        policy: the policy and its parameters, ``"NAME[:k=v,...]"``
            (``"fixed-wait:t=100ms"``); :func:`policies` lists them.
        workload: a synthetic FG workload instead of a trace, by its arrival
            process: ``"poisson"``, ``"erlang:k=4"``, ``"lognormal:cv=3"``,
            ``"hyperexp:cv=4"``, ``"mmpp:cv=9,burst=1000"`` (two-state MMPP
            fitted to the inter-arrival CV and the mean arrivals per burst) or
            ``"mmpp:rates=40/1,sojourn=20s/60s"``.
        device, service, arrival_rate, ...: the input: ``device`` (an id, or an MSR ``"host:disk"``
            name such as ``"hm:0"``); ``service`` (FG service model: for
            a trace, models completions; for a workload, its service times,
            default ``"exp:10ms"``); ``arrival_rate`` (requests/s) or
            ``utilization`` (FG utilisation, sets the rate), ``requests``
            (1000000, as ``fallow simulate --requests``), ``request_size`` (4096 or ``"4KiB"``),
            ``write_fraction`` (0.5). The BG work: ``bg`` (service model,
            ``"exp:10ms"``, ``"const:5ms"``, ``"size[:base=8ms,knee=64KiB,rate=100MB]"``),
            ``bg_size`` (65536 or ``"64KiB"``), ``bg_work`` (``"endless"``,
            ``"requests:N"``, ``"bytes:SIZE"``, ``"writes:100%"``),
            ``switch_penalty`` (seconds or ``"2ms"``), ``seed`` (1). Online
            re-tuning: ``retune`` (an FG budget, ``"1ms"`` or ``"5%"``: the
            policy's knob, left out of ``policy``, is re-fitted as the run
            goes on a sliding window of the idle/busy history it has seen),
            ``retune_window`` (2000 idle intervals), ``retune_every`` (a
            quarter of the window); the result then has ``retune`` (budget,
            knob, window, every, final_spec, history: the knob's trajectory).
        then, then_device, gap: a second :class:`fallow.Trace` played after
            ``trace`` on the same device, starting ``gap`` (1 s) after it
            ends (``fallow simulate --then TRACE2 --then-device ID --gap``;
            Busy Bee §5.3's concatenated traces): one device whose
            workload changes. ``then_device`` picks its device as
            ``device`` does the first's. The result then has ``parts``,
            each part's figures over its own span (:attr:`SimulationResult.parts`).

    Returns:
        A :class:`SimulationResult`.

    Raises:
        ParameterError: an unknown policy, a bad parameter or workload spec,
            or a knob given with ``retune``.
    """
    return SimulationResult(_fallow.simulate(trace, policy, **given(options)))


@keywords(CompareOptions)
def compare(
    trace: Trace | None = None,
    policies: list[str] | None = None,
    **options: Unpack[CompareOptions],
) -> pd.DataFrame:
    """Run several policies on one input (prepared once) and tabulate them.

    Args:
        trace: as for :func:`simulate`.
        policies: policy specs; default: every registered policy with its
            default parameters, clairvoyant references last.
        workload: as for :func:`simulate`.
        device, service, arrival_rate, ...: as for :func:`simulate` (the
            same defaults as ``fallow compare``: 1,000,000 synthetic requests).
        threads: policies run side by side, each as it would alone (the
            core's runner, as ``fallow compare``'s); default: one per core,
            or ``FALLOW_THREADS``.
        html: also write ``fallow compare --html``'s page to this path (the
            CLI's page, byte for byte, written atomically; checked before
            any work as the CLI checks ``--html``: never the trace's own
            file, a device node or a FIFO, nor a file fallow did not write
            unless ``overwrite=True``).

    Returns:
        A pandas DataFrame with one row per policy, in the order given, and
        the columns of ``fallow.sim.COLUMNS``: ``policy`` (the spec),
        ``name``, ``clairvoyant``, ``slowdown``, ``mean_added_delay_s``,
        response-time means and percentiles, ``collision_rate``, BG
        ``bg_completed``, ``bg_bytes``, ``bg_throughput_bytes_per_s``,
        ``bg_mean_response_s``, ``utilization``, ``idle_used_fraction``, ….
    """
    runs = _fallow.compare(trace, policies, **given(options))
    rows = [SimulationResult(r).row() for r in runs]
    return _pd().DataFrame(rows, columns=[c for c, _ in COLUMNS])


def policies() -> pd.DataFrame:
    """The policy registry: one row per policy with ``name``, ``summary``,
    ``params`` (with units and defaults) and ``clairvoyant``.

    >>> import fallow
    >>> p = fallow.policies()
    >>> list(p.columns)
    ['name', 'summary', 'params', 'clairvoyant']
    >>> "fixed-wait" in set(p["name"])
    True
    """
    rows = [p.to_dict() for p in _fallow.policies()]
    return _pd().DataFrame(rows, columns=["name", "summary", "params", "clairvoyant"])
