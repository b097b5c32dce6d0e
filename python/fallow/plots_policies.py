"""Plots of policy results with matplotlib: :func:`plot_compare` (FG slowdown
against BG throughput, one marker per policy), :func:`plot_ccdf` (FG
response-time CCDFs), :func:`plot_pareto` (the fronts of ``fallow pareto
--json``) and :func:`plot_energy` (one of ``fallow.energy``'s figures per
policy over the settings). As in the HTML reports, every series differs from
the others in colour, dash pattern *and* marker, and carries its name at its
end, so curves that coincide stay told apart.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import fallow
>>> from fallow import plots_policies
>>> df = fallow.compare(workload="poisson", utilization=0.3, requests=2_000,
...                     policies=["aggressive", "fixed-wait:t=1s"])
>>> ax = plots_policies.plot_compare(df)
>>> ax.get_xlabel()
'BG throughput (MB/s)'
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fallow.errors import require

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["STYLES", "plot_ccdf", "plot_compare", "plot_energy", "plot_pareto", "save"]

_COLORS = ["#2563eb", "#f97316", "#10b981", "#8b5cf6", "#e11d48", "#0891b2"]
_DASHES = ["-", "--", ":", "-."]
_MARKERS = ["o", "s", "^", "D", "v", "x", "+"]


def style(i: int) -> dict[str, Any]:
    """The i-th series' colour, line style and marker: all three change from
    one series to the next (6 colours, 4 dashes, 7 markers, the HTML
    reports' cycle), so no two of the first 84 share all three."""
    return {
        "color": _COLORS[i % 6],
        "linestyle": _DASHES[i % 4],
        "marker": _MARKERS[i % 7],
    }


#: The first 12 styles, for reference.
STYLES = [style(i) for i in range(12)]


def _pyplot():
    require("matplotlib", "plot", "Plotting")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax: Axes | None, wide: bool = False) -> Axes:
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(8, 4.5) if wide else (6, 4))
    return ax


def _end_label(ax: Axes, x: float, y: float, text: str, color: str) -> None:
    ax.annotate(
        text,
        (x, y),
        xytext=(4, 0),
        textcoords="offset points",
        color=color,
        fontsize=8,
        va="center",
    )


def plot_compare(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """FG slowdown against BG throughput, one marker per policy (hollow for
    clairvoyant references), each labelled with its spec. ``frame`` is
    :func:`fallow.compare`'s."""
    ax = _axes(ax)
    for i, row in enumerate(frame.itertuples(index=False)):
        s = style(i)
        x = row.bg_throughput_bytes_per_s / 1e6
        y = row.slowdown
        ax.plot(
            [x],
            [y],
            linestyle="none",
            marker=s["marker"],
            color=s["color"],
            markerfacecolor="none" if row.clairvoyant else s["color"],
            markersize=7,
            label=row.policy,
        )
        _end_label(ax, x, y, row.policy, s["color"])
    ax.set_xlabel("BG throughput (MB/s)")
    ax.set_ylabel("FG slowdown")
    ax.set_title("FG slowdown against BG throughput")
    ax.grid(alpha=0.3)
    return ax


def plot_ccdf(results: dict[str, Any], ax: Axes | None = None) -> Axes:
    """FG response-time CCDFs (log–log) of ``{name: SimulationResult}``,
    with the first result's baseline (no BG work) dashed grey. Markers sit
    at about ten places along each curve, staggered by series."""
    ax = _axes(ax, wide=True)
    first = True
    for i, (name, r) in enumerate(results.items()):
        if first:
            b = r.baseline_ccdf
            ax.plot(b["response_s"], b["p_greater"], "--", color="0.6", lw=2.4, label="baseline")
            first = False
        d = r.ccdf
        s = style(i)
        n = len(d)
        step = max(n // 10, 1)
        ax.plot(
            d["response_s"],
            d["p_greater"],
            markevery=(min(i * step // 7, max(n - 1, 0)), step),
            lw=1.6,
            label=name,
            **s,
        )
        if n:
            _end_label(ax, d["response_s"].iloc[-1], d["p_greater"].iloc[-1], name, s["color"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("response time (s)")
    ax.set_ylabel("requests slower than x")
    ax.set_title("CCDF of FG response times")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3, which="both")
    return ax


def plot_pareto(fronts: Any, ax: Axes | None = None, knob_labels: int = 8) -> Axes:
    """BG throughput against mean added FG delay, one line per policy's
    Pareto front (clairvoyant references grey), up to ``knob_labels``
    points of each labelled with their knob value. ``fronts``: the list
    ``fallow pareto --json`` prints (or a dict with a ``fronts`` key)."""
    if isinstance(fronts, dict):
        fronts = fronts["fronts"]
    ax = _axes(ax, wide=True)
    deployable = 0
    for f in fronts:
        pts = f["front"]
        if f.get("clairvoyant"):
            s = {"color": "0.55", "linestyle": "--", "marker": _MARKERS[(deployable + 3) % 7]}
            name = f"{f['policy']} (clairvoyant)"
        else:
            s = style(deployable)
            deployable += 1
            name = f["policy"]
        xs = [p["fg_mean_added_delay_s"] for p in pts]
        ys = [p["bg_throughput_bytes_per_s"] / 1e6 for p in pts]
        ax.plot(xs, ys, lw=1.8, label=name, **s)
        every = max(-(-len(pts) // max(knob_labels, 1)), 1)
        for j, p in enumerate(pts):
            if f.get("knob") and p.get("knob") and (j % every == 0 or j == len(pts) - 1):
                ax.annotate(
                    f"{f['knob']}={p['knob']}",
                    (xs[j], ys[j]),
                    xytext=(3, 4),
                    textcoords="offset points",
                    fontsize=7,
                    color=s["color"],
                )
        if pts:
            _end_label(ax, xs[-1], ys[-1], name, s["color"])
    ax.set_xlabel("mean added delay per FG request (s)")
    ax.set_ylabel("BG throughput (MB/s)")
    ax.set_title("Pareto fronts")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def plot_energy(result: Any, column: str = "exposed_delay_s", ax: Axes | None = None) -> Axes:
    """One of ``fallow.energy``'s figures (a column of ``result.runs``:
    ``exposed_delay_s``, ``idle_periods``, ``energy_vs_always_on``, …) per
    policy over the settings. Policies are shifted a little sideways within
    each setting, so equal values do not hide each other."""
    runs = result.runs if hasattr(result, "runs") else result
    ax = _axes(ax)
    settings = list(dict.fromkeys(runs["setting"]))
    policies = list(dict.fromkeys(runs["policy"]))
    n = len(policies)
    dodge = 0.3 / n if n > 1 else 0.0
    for i, p in enumerate(policies):
        sub = runs[runs["policy"] == p]
        shift = (i - (n - 1) / 2) * dodge
        xs = [settings.index(s) + shift for s in sub["setting"]]
        ys = list(sub[column])
        st = style(i)
        ax.plot(xs, ys, lw=1.8, label=p, **st)
        if xs:
            _end_label(ax, xs[-1], ys[-1], p, st["color"])
    ax.set_xticks(range(len(settings)))
    ax.set_xticklabels(settings)
    ax.set_xlabel("requests served locally")
    ax.set_ylabel(column.replace("_", " "))
    ax.set_title(f"{column.replace('_', ' ')} by policy")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def save(ax: Axes, path: str | os.PathLike, **savefig: Any) -> None:
    """Save ``ax``'s figure to ``path`` (PNG unless the suffix says otherwise)."""
    fig = ax.get_figure()
    fig.tight_layout()
    savefig.setdefault("dpi", 100)
    fig.savefig(os.fspath(path), **savefig)
