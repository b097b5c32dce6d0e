"""The policy plots (compare, CCDF, Pareto, energy) render as PNGs with
labelled axes, and their series differ in colour, dash and marker."""

from __future__ import annotations

import pytest

import fallow

plt = pytest.importorskip("matplotlib.pyplot")
mpimg = pytest.importorskip("matplotlib.image")
pp = pytest.importorskip("fallow.plots_policies")


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _png(ax, path, min_colours=3):
    """Save, read back: the right size, more than a blank canvas."""
    pp.save(ax, path)
    img = mpimg.imread(path)
    w, h = ax.get_figure().get_size_inches() * 100
    assert img.shape[:2] == (round(h), round(w))
    colours = {tuple(px) for px in img.reshape(-1, img.shape[2])[::97]}
    assert len(colours) >= min_colours, "an (almost) empty image"
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def _distinct(lines):
    triples = {(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in lines}
    assert len(triples) == len(lines), [(ln.get_label(), ln.get_color()) for ln in lines]


POLICIES = ["aggressive", "fixed-wait:t=10ms", "fixed-wait:t=100ms", "cdf-estimates", "busy-bee"]
OPTS = {"workload": "poisson", "utilization": 0.3, "requests": 3_000, "bg": "exp:5ms"}


def test_compare_png(tmp_path):
    df = fallow.compare(policies=POLICIES + ["oracle:x=10"], **OPTS)
    ax = pp.plot_compare(df)
    # one marker per policy, each with its name beside it
    assert len(ax.get_lines()) == len(df)
    assert {t.get_text() for t in ax.texts} == set(df["policy"])
    assert len({ln.get_marker() for ln in ax.get_lines()}) == len(df)
    _png(ax, tmp_path / "compare.png")


def test_ccdf_png(tmp_path):
    runs = {p: fallow.simulate(policy=p, **OPTS) for p in POLICIES}
    ax = pp.plot_ccdf(runs)
    lines = ax.get_lines()
    assert lines[0].get_label() == "baseline"
    _distinct(lines[1:])
    assert {t.get_text() for t in ax.texts} == set(POLICIES)
    _png(ax, tmp_path / "ccdf.png")


def test_pareto_png(tmp_path):
    # the shape `fallow pareto --json` prints
    def pt(t, delay, mb):
        return {
            "spec": f"fixed-wait:t={t}",
            "knob": t,
            "fg_mean_added_delay_s": delay,
            "bg_throughput_bytes_per_s": mb * 1e6,
        }

    fronts = [
        {"policy": "fixed-wait", "knob": "t", "front": [pt("1s", 1e-4, 2), pt("100ms", 1e-3, 5)]},
        {"policy": "deadline", "knob": "t", "front": [pt("1s", 1e-4, 2), pt("100ms", 1e-3, 5)]},
        {"policy": "oracle", "knob": "x", "clairvoyant": True, "front": [pt("10", 2e-4, 6)]},
    ]
    ax = pp.plot_pareto(fronts)
    _distinct(ax.get_lines())
    labels = {t.get_text() for t in ax.texts}
    assert {"t=1s", "t=100ms", "fixed-wait", "deadline"} <= labels
    _png(ax, tmp_path / "pareto.png")


def test_energy_png(tmp_path):
    t = fallow.synthetic(rate=0.5, requests=3_000, service="exp:5ms")
    r = fallow.energy(
        t, policy=["timeout:t=10s", "timeout:t=20s", "adaptive"], local_fraction=[1, 0.1, 0.01]
    )
    ax = pp.plot_energy(r, "spinups")
    _distinct(ax.get_lines())
    assert len(ax.get_lines()) == 3
    _png(ax, tmp_path / "energy.png")
