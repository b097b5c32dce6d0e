"""Characterisation results as plain data plus pandas frames.

:func:`fallow.characterize` returns a :class:`Characterization`: ``.data`` is
the plain dict the core produced (the same keys as ``fallow analyze --json``);
the properties turn its curves and tables into pandas DataFrames.

>>> import fallow
>>> trace = fallow.synthetic(rate=30, requests=20_000, service="exp:10ms", seed=1)
>>> c = fallow.characterize(trace)
>>> round(c.data["utilization"], 1)
0.3
>>> list(c.idle_cdf.columns)
['x_s', 'cdf']
>>> c.summary["requests"]
20000
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fallow import _schema

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Characterization"]


def _pd():
    # pandas is imported on first use: `import fallow` stays light (numpy only).
    import pandas

    return pandas


class Characterization:
    """Everything ``fallow analyze`` reports about one device's trace.

    Attributes:
        data: the plain result (dicts, lists, numbers); see the properties
            for the same content as DataFrames.
    """

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __repr__(self) -> str:
        t = self.data["trace"]
        idle = self.data["idle"]
        return (
            f"<fallow.Characterization {t['requests']} requests, "
            f"{idle['count']} idle intervals (mean {idle['mean_s']:.4g} s, CV {idle['cv']:.3g}), "
            f"utilization {self.data['utilization']:.3g}>"
        )

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def to_json(self, **kwargs: Any) -> str:
        """The result as JSON text (the schema of ``fallow analyze --json``)."""
        return _schema.to_json(self.data, **kwargs)

    @property
    def summary(self) -> pd.Series:
        """Headline numbers as a Series: trace size, utilisation, idle and busy statistics.

        Idle keys start with ``idle_``, busy-period keys with ``busy_``.
        """
        d = self.data
        t, idle, busy = d["trace"], d["idle"], d["busy"]
        row: dict[str, Any] = {
            "path": t["path"],
            "device": t["device"],
            "requests": t["requests"],
            "span_s": t["span_s"],
            "utilization": d["utilization"],
        }
        row.update({f"idle_{k}": v for k, v in idle.items()})
        row.update(
            {
                f"busy_{k}": busy[k]
                for k in (
                    "count",
                    "mean_s",
                    "cv",
                    "p50_s",
                    "p90_s",
                    "p99_s",
                    "max_s",
                    "mean_requests",
                    "max_requests",
                    "threshold_requests",
                    "long_fraction",
                    "cws",
                )
            }
        )
        row["ar_order"] = d["ar"]["order"] if d.get("ar") else None
        row["best_period_h"] = (d.get("periodicity") or {}).get("best_period_h")
        return _pd().Series(row, dtype=object)

    @property
    def idle_cdf(self) -> pd.DataFrame:
        """Empirical CDF of idle interval lengths: ``x_s``, ``cdf`` (fraction ≤ x)."""
        c = self.data["idle_cdf"]
        return _pd().DataFrame({"x_s": c["x_s"], "cdf": c["cdf"]}, dtype=float)

    @property
    def remaining(self) -> pd.DataFrame:
        """Remaining idle time after having waited ``waited_s``: ``expected_s`` (mean),
        ``p1_s`` (1st percentile; NaN once no interval is that long), ``usable_fraction``
        of all idle time left to a policy that waits that long, ``surviving_fraction``."""
        return _pd().DataFrame(self.data["remaining"], dtype=float)

    @property
    def concentration(self) -> pd.DataFrame:
        """Share of idle time (``idle_fraction``) in the longest ``top_percent`` % of intervals."""
        c = self.data["concentration"]
        return _pd().DataFrame(
            {"top_percent": c["top_percent"], "idle_fraction": c["idle_fraction"]}, dtype=float
        )

    @property
    def lag_pairs(self) -> pd.DataFrame:
        """P(small, small), P(small, large), P(large, small), P(large, large) of idle
        intervals ``lag`` apart, split at (CV+1)·mean (Mi et al. Fig. 2), indexed by lag."""
        rows = self.data["lag_pairs"]["lags"]
        cols = ["lag", "small_small", "small_large", "large_small", "large_large"]
        df = _pd().DataFrame(rows, columns=cols)
        return df.astype({c: float for c in cols[1:]}).set_index("lag")

    @property
    def busy_p_lag(self) -> pd.DataFrame:
        """Busy Bee's P_lag = P(busy period k+lag is long | period k is long), indexed by lag."""
        p = self.data["busy"]["p_lag"]
        df = _pd().DataFrame({"lag": range(1, len(p) + 1), "p_lag": p})
        return df.astype({"p_lag": float}).set_index("lag")

    @property
    def acf(self) -> pd.DataFrame:
        """Autocorrelation of the idle-interval sequence, indexed by lag; ``band`` is
        the ±1.96/√n significance bound."""
        a = self.data["acf"]
        df = _pd().DataFrame({"lag": a["lags"], "acf": a["values"]}).astype({"acf": float})
        df["band"] = float(a["band"])
        return df.set_index("lag")

    @property
    def rate(self) -> pd.DataFrame:
        """Request and byte rate over time in bins of ``data["rate"]["bin_s"]`` seconds."""
        r = self.data["rate"]
        return _pd().DataFrame(
            {
                "start_s": r["start_s"],
                "requests_per_s": r["requests_per_s"],
                "bytes_per_s": r["bytes_per_s"],
            },
            dtype=float,
        )
