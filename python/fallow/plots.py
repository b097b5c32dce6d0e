"""Plots of a :class:`~fallow.Characterization` with matplotlib.

matplotlib is an optional dependency (``pip install 'fallow[plot]'``) and is
imported only when a function here is called. Every ``plot_*`` function
draws into ``ax`` (a new figure when omitted) and returns the Axes;
:func:`report` draws them all into one grid and saves it.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import fallow, fallow.plots
>>> c = fallow.characterize(fallow.synthetic(rate=30, requests=5_000, service="exp:10ms"))
>>> ax = fallow.plots.plot_idle_cdf(c)
>>> ax.get_xlabel()
'idle interval length (s)'
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fallow.errors import require

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from fallow.analysis import Characterization

__all__ = [
    "plot_acf",
    "plot_concentration",
    "plot_idle_cdf",
    "plot_lag_pairs",
    "plot_p_lag",
    "plot_rate",
    "plot_remaining",
    "report",
]


def _pyplot():
    require("matplotlib", "plot", "Plotting")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(5, 3.5))
    return ax


def plot_idle_cdf(c: Characterization, ax: Axes | None = None, normalize: bool = False) -> Axes:
    """Empirical CDF of idle interval lengths (log x). With ``normalize``, x is
    divided by the mean idle length, as in Mi et al. Fig. 1."""
    ax = _axes(ax)
    df = c.idle_cdf
    mean = c.data["idle_cdf"]["mean_s"]
    x = df["x_s"] / mean if normalize and mean > 0 else df["x_s"]
    ax.step(x, df["cdf"], where="post", label="idle intervals")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("idle length / mean" if normalize else "idle interval length (s)")
    ax.set_ylabel("CDF")
    idle = c.data["idle"]
    ax.set_title(f"Idle intervals: mean {idle['mean_s']:.3g} s, CV {idle['cv']:.2f}")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def plot_remaining(c: Characterization, ax: Axes | None = None) -> Axes:
    """Expected and 1st-percentile remaining idle time after having waited x
    (Practical Scrubbing Figs. 11–12), log-log."""
    ax = _axes(ax)
    df = c.remaining
    ax.plot(df["waited_s"], df["expected_s"], label="mean remaining")
    ax.plot(df["waited_s"], df["p1_s"], label="1st percentile", linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time already idle (s)")
    ax.set_ylabel("remaining idle time (s)")
    ax.set_title("Remaining idle time")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return ax


def plot_concentration(c: Characterization, ax: Axes | None = None) -> Axes:
    """Fraction of all idle time in the longest k % of intervals (Practical Scrubbing Fig. 10)."""
    ax = _axes(ax)
    df = c.concentration
    ax.plot(df["top_percent"], df["idle_fraction"])
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("longest idle intervals (%)")
    ax.set_ylabel("fraction of idle time")
    top10 = c.data["concentration"]["top10_fraction"]
    ax.set_title(f"Idle time concentration: top 10 % hold {top10:.0%}")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def plot_lag_pairs(c: Characterization, ax: Axes | None = None) -> Axes:
    """Probabilities of (small, small) … (large, large) idle-interval pairs by lag,
    split at (CV+1)·mean (Mi et al. Fig. 2)."""
    ax = _axes(ax)
    df = c.lag_pairs
    for col, label in [
        ("small_small", "(S,S)"),
        ("small_large", "(S,L)"),
        ("large_small", "(L,S)"),
        ("large_large", "(L,L)"),
    ]:
        ax.plot(df.index, df[col], marker="o", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("lag")
    ax.set_ylabel("probability")
    ax.set_title(f"Idle pairs, split at {c.data['lag_pairs']['split_s']:.3g} s")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def plot_p_lag(c: Characterization, ax: Axes | None = None) -> Axes:
    """Busy Bee's P_lag: probability that busy period k+lag is long given that
    period k is long, with the Cluster Window Size marked."""
    ax = _axes(ax)
    df = c.busy_p_lag
    busy = c.data["busy"]
    ax.bar(df.index, df["p_lag"], label="P_lag")
    ax.axhline(busy["long_fraction"], color="gray", linestyle=":", label="P(long)")
    ax.axvline(busy["cws"], color="C3", linestyle="--", label=f"CWS = {busy['cws']}")
    ax.set_xlabel("lag (busy periods)")
    ax.set_ylabel("P(long | long)")
    ax.set_title(f"Busy periods ≥ {busy['threshold_requests']} requests")
    ax.legend(fontsize="small")
    return ax


def plot_acf(c: Characterization, ax: Axes | None = None) -> Axes:
    """Autocorrelation of idle intervals with the ±1.96/√n band."""
    ax = _axes(ax)
    df = c.acf
    ax.bar(df.index, df["acf"], width=0.6, label="ACF")
    if len(df):
        band = float(df["band"].iloc[0])
        ax.axhline(band, color="gray", linestyle="--", label="95 % band")
        ax.axhline(-band, color="gray", linestyle="--")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xlabel("lag (idle intervals)")
    ax.set_ylabel("autocorrelation")
    ax.set_title("ACF of idle intervals")
    return ax


def plot_rate(c: Characterization, ax: Axes | None = None) -> Axes:
    """Request rate over time."""
    ax = _axes(ax)
    df = c.rate
    ax.step(df["start_s"], df["requests_per_s"], where="post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests/s")
    ax.set_title(f"Request rate ({c.data['rate']['bin_s']:.3g} s bins)")
    ax.grid(True, alpha=0.3)
    return ax


_PANELS = [
    plot_idle_cdf,
    plot_remaining,
    plot_concentration,
    plot_lag_pairs,
    plot_p_lag,
    plot_acf,
    plot_rate,
]


def report(c: Characterization, path: str | os.PathLike | None = None, **savefig: Any) -> Figure:
    """Draw every plot into one grid figure, with the headline numbers in the
    last panel, and save it to ``path`` (PNG unless the suffix says
    otherwise) when given. Returns the figure."""
    plt = _pyplot()
    fig, axes = plt.subplots(3, 3, figsize=(15, 12))
    flat = axes.ravel()
    for panel, ax in zip(_PANELS, flat):
        panel(c, ax=ax)
    _summary_panel(c, flat[len(_PANELS)])
    for ax in flat[len(_PANELS) + 1 :]:
        ax.set_axis_off()
    t = c.data["trace"]
    fig.suptitle(f"fallow: {os.path.basename(t['path']) or 'trace'} ({t['requests']:,} requests)")
    fig.tight_layout()
    if path is not None:
        savefig.setdefault("dpi", 100)
        fig.savefig(os.fspath(path), **savefig)
    return fig


def _summary_panel(c: Characterization, ax: Axes) -> None:
    d = c.data
    idle, busy, t = d["idle"], d["busy"], d["trace"]
    lines = [
        f"requests        {t['requests']:,}",
        f"span            {t['span_s']:.4g} s",
        f"utilization     {d['utilization']:.3f}",
        f"idle intervals  {idle['count']:,}",
        f"  mean / CV     {idle['mean_s']:.4g} s / {idle['cv']:.3g}",
        f"  p50 / p99     {idle['p50_s']:.4g} / {idle['p99_s']:.4g} s",
        f"  max           {idle['max_s']:.4g} s",
        f"busy periods    {busy['count']:,}",
        f"  mean          {busy['mean_s']:.4g} s, {busy['mean_requests']:.3g} req",
        f"  threshold     {busy['threshold_requests']} req, CWS {busy['cws']}",
    ]
    ax.set_axis_off()
    ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=10)
