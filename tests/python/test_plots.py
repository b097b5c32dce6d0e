"""Plot smoke tests on the Agg backend: every plot draws what it should."""

from __future__ import annotations

import pytest

import fallow

plt = pytest.importorskip("matplotlib.pyplot")
plots = pytest.importorskip("fallow.plots")


@pytest.fixture(scope="module")
def ch():
    t = fallow.synthetic(
        arrival="hyperexponential", rate=40, cv=3, requests=20_000, service="exp:5ms"
    )
    return fallow.characterize(t)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_idle_cdf(ch):
    ax = plots.plot_idle_cdf(ch)
    (line,) = ax.get_lines()
    assert len(line.get_xdata()) == len(ch.idle_cdf)
    assert ax.get_xscale() == "log"
    ax2 = plots.plot_idle_cdf(ch, normalize=True)
    assert ax2.get_xlabel() == "idle length / mean"


def test_remaining(ch):
    ax = plots.plot_remaining(ch)
    assert [line.get_label() for line in ax.get_lines()] == ["mean remaining", "1st percentile"]


def test_concentration(ch):
    ax = plots.plot_concentration(ch)
    (line,) = ax.get_lines()
    assert max(line.get_ydata()) == pytest.approx(1.0)


def test_lag_pairs(ch):
    ax = plots.plot_lag_pairs(ch)
    lines = ax.get_lines()
    assert len(lines) == 4
    assert all(len(line.get_xdata()) == 9 for line in lines)


def test_p_lag(ch):
    ax = plots.plot_p_lag(ch)
    assert len(ax.patches) == 20  # one bar per lag
    assert any("CWS" in str(line.get_label()) for line in ax.get_lines())


def test_acf(ch):
    ax = plots.plot_acf(ch)
    assert len(ax.patches) == len(ch.acf)
    assert len(ax.get_lines()) == 3  # +band, -band, zero


def test_rate(ch):
    ax = plots.plot_rate(ch)
    (line,) = ax.get_lines()
    assert len(line.get_xdata()) == len(ch.rate)


def test_draw_into_given_axes(ch):
    fig, ax = plt.subplots()
    assert plots.plot_acf(ch, ax=ax) is ax


def test_report_png(ch, tmp_path):
    path = tmp_path / "report.png"
    fig = plots.report(ch, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes) == 9
    titles = [ax.get_title() for ax in fig.axes]
    assert sum(bool(t) for t in titles) == 7
