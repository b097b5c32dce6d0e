"""Type stubs of the compiled core ``fallow._fallow`` (crates/fallow-py)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
from typing_extensions import Unpack

from fallow._options import (
    CompareOptions,
    ParetoOptions,
    RecommendOptions,
    SimulateOptions,
    TuneOptions,
)

__version__: str
SCHEMA_VERSION: int

ArrayLike = npt.ArrayLike | Sequence[int]

class FallowError(Exception):
    """Base class of every error fallow raises (except OSError for unreadable files)."""

class TraceFormatError(FallowError):
    """A trace file is malformed, empty or of an unknown format."""

    path: str | None
    line: int | None
    offset: int | None
    record: int | None
    field: str | None

class ParameterError(FallowError):
    """An argument is out of range or cannot be parsed."""

    name: str | None

class DeviceCount(TypedDict):
    id: int
    requests: int

class Columns(TypedDict):
    arrival_ns: npt.NDArray[np.uint64]
    completion_ns: npt.NDArray[np.uint64] | None
    offset_bytes: npt.NDArray[np.uint64]
    size_bytes: npt.NDArray[np.uint32]
    is_write: npt.NDArray[np.bool_]
    device: npt.NDArray[np.uint32]

class BusyPeriods(TypedDict):
    start_s: npt.NDArray[np.float64]
    length_s: npt.NDArray[np.float64]
    requests: npt.NDArray[np.uint32]

class BusyPeriodsNs(TypedDict):
    start_ns: npt.NDArray[np.uint64]
    length_ns: npt.NDArray[np.uint64]
    requests: npt.NDArray[np.uint32]

class Trace:
    """A block trace as columns, sorted by arrival, integer ns since the first arrival."""

    @staticmethod
    def from_columns(
        arrival_ns: ArrayLike,
        completion_ns: ArrayLike | None = None,
        offset_bytes: ArrayLike | None = None,
        size_bytes: ArrayLike | None = None,
        is_write: ArrayLike | None = None,
        device: ArrayLike | None = None,
        time_unit: str | None = None,
        offset_unit_bytes: int = 1,
        size_unit_bytes: int = 1,
    ) -> Trace: ...
    @staticmethod
    def from_pandas(
        df: Any,
        *,
        columns: dict[str, str] | None = None,
        time_unit: str | None = None,
        offset_unit_bytes: int = 1,
        size_unit_bytes: int = 1,
    ) -> Trace: ...
    @staticmethod
    def from_polars(
        df: Any,
        *,
        path: str | os.PathLike[str] | None = None,
        columns: dict[str, str] | None = None,
        time_unit: str | None = None,
        offset_unit_bytes: int = 1,
        size_unit_bytes: int = 1,
    ) -> Trace: ...
    def __len__(self) -> int: ...
    @property
    def arrival_ns(self) -> npt.NDArray[np.uint64]: ...
    @property
    def completion_ns(self) -> npt.NDArray[np.uint64] | None: ...
    @property
    def offset_bytes(self) -> npt.NDArray[np.uint64]: ...
    @property
    def size_bytes(self) -> npt.NDArray[np.uint32]: ...
    @property
    def is_write(self) -> npt.NDArray[np.bool_]: ...
    @property
    def device(self) -> npt.NDArray[np.uint32]: ...
    @property
    def has_completions(self) -> bool: ...
    @property
    def span_s(self) -> float: ...
    @property
    def span_ns(self) -> int: ...
    @property
    def report(self) -> dict[str, Any]: ...
    def columns(self) -> Columns: ...
    def devices(self) -> list[DeviceCount]: ...
    def select_device(self, id: int | str) -> Trace: ...
    def write(self, path: str | os.PathLike[str], overwrite: bool = False) -> str: ...
    def idle_intervals(
        self, service: str | None = None, seed: int = 1, device: int | None = None
    ) -> npt.NDArray[np.float64]: ...
    def idle_intervals_ns(
        self, service: str | None = None, seed: int = 1, device: int | None = None
    ) -> npt.NDArray[np.uint64]: ...
    def busy_periods(
        self, service: str | None = None, seed: int = 1, device: int | None = None
    ) -> BusyPeriods: ...
    def busy_periods_ns(
        self, service: str | None = None, seed: int = 1, device: int | None = None
    ) -> BusyPeriodsNs: ...

def read_trace(
    path: str | os.PathLike[str],
    format: str | None = None,
    skip_bad: bool = False,
    time_unit: str | None = None,
    offset_unit_bytes: int | None = None,
    size_unit_bytes: int | None = None,
    completion_column: bool = False,
) -> Trace: ...
def characterize(
    trace: Trace,
    device: int | str | None = None,
    service: str | None = None,
    seed: int = 1,
    acf_max_lag: int = 50,
    ar_max_order: int = 10,
    rate_bin_s: float | None = None,
    curve_points: int = 200,
) -> dict[str, Any]: ...
def analyze(
    trace: Trace,
    device: int | str | None = None,
    service: str | None = None,
    seed: int = 1,
    acf_max_lag: int = 50,
    ar_max_order: int = 10,
    rate_bin_s: float | None = None,
    curve_points: int = 200,
    html: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]: ...
def analyze_all_devices(
    path: str | os.PathLike[str],
    format: str | None = None,
    skip_bad: bool = False,
    service: str | None = None,
    seed: int = 1,
    html: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]: ...

# The keyword arguments are spelled once, in fallow/_options.py.
def simulate(
    trace: Trace | None = None, policy: str = "", **options: Unpack[SimulateOptions]
) -> dict[str, Any]: ...
def compare(
    trace: Trace | None = None,
    policies: Sequence[str] | None = None,
    **options: Unpack[CompareOptions],
) -> list[dict[str, Any]]: ...
def tune(
    trace: Trace | None = None,
    policy: str = "",
    budget: str = "1ms",
    **options: Unpack[TuneOptions],
) -> dict[str, Any] | list[dict[str, Any]]: ...
def pareto(
    trace: Trace | None = None,
    policies: Sequence[str] | None = None,
    **options: Unpack[ParetoOptions],
) -> list[dict[str, Any]]: ...
def recommend(
    trace: Trace | None = None,
    budget: str = "1ms",
    **options: Unpack[RecommendOptions],
) -> dict[str, Any]: ...
def energy(trace: Trace | str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """The JSON of ``fallow energy --json`` as plain data; the keyword
    arguments are :func:`fallow.energy`'s, with ``policy=None`` running every
    spin-down policy (``fallow.energy`` defaults to the 10 s timeout)."""

def scrub(target: str, **options: Any) -> dict[str, Any]:
    """The JSON of ``fallow scrub TARGET --json`` as plain data; the keyword
    arguments are :func:`fallow.live.scrub`'s."""

def scrub_plan(
    *,
    capacity: int | str | None = None,
    segments: Sequence[int | str] | None = None,
    regions: Sequence[int] | None = None,
    burst_span: int | str | None = None,
    rpm: float | None = None,
    rate: int | str | None = None,
    full_stroke: float | str | None = None,
    duty: float | None = None,
    check: int | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The JSON of ``fallow scrub-plan --json`` as plain data, without its
    ``schema_version``; see :func:`fallow.live.scrub_plan`."""

class PolicyInfo:
    """One policy of the registry (``fallow policies``), read-only."""

    name: str
    summary: str
    params: str
    clairvoyant: bool
    def to_dict(self) -> dict[str, Any]: ...

def policies() -> list[PolicyInfo]: ...
def defaults() -> dict[str, Any]:
    """The core's defaults of the input and BG keyword arguments
    (``fallow_core::sim::Request``, shared with the CLI)."""

def synthetic(
    arrival: str = "poisson",
    rate: float | None = None,
    requests: int = 100_000,
    service: str = "exp:5ms",
    seed: int = 1,
    k: int | None = None,
    cv: float | None = None,
    mmpp_rates: tuple[float, float] | None = None,
    mmpp_switch: tuple[float, float] | None = None,
    request_size_bytes: int = 4096,
    capacity_bytes: int = 1_000_000_000_000,
    write_fraction: float = 0.5,
    burst: float | None = None,
) -> Trace: ...
def _cli_main(argv: list[str], program: str, leading_args: list[str]) -> int: ...
