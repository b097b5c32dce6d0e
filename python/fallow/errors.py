"""The exceptions fallow raises.

They are defined by the compiled core (``fallow._fallow``), where Rust errors
become Python exceptions, and re-exported here::

    FallowError                 any fallow failure
    ├── TraceFormatError        malformed record, empty trace, unknown format
    │                           (.path, .line / .offset / .record, .field where known)
    └── ParameterError          an argument out of range or unparsable (.name)
    OSError (and subclasses)    the file could not be opened or read

>>> import fallow
>>> try:
...     fallow.synthetic(rate=10, requests=10, service="warp")
... except fallow.ParameterError as e:
...     print(type(e).__name__, "-", e.name)
ParameterError - service model
"""

from fallow._fallow import FallowError, ParameterError, TraceFormatError

__all__ = ["FallowError", "ParameterError", "TraceFormatError", "MissingExtraError"]


class MissingExtraError(FallowError, ImportError):
    """An optional dependency (an *extra* such as ``plot`` or ``parquet``) is not installed."""

    def __init__(self, package: str, extra: str, feature: str):
        super().__init__(
            f"{feature} needs the `{package}` package: pip install 'fallow[{extra}]' "
            f"(or pip install {package})"
        )
        self.name = package


def require(package: str, extra: str, feature: str):
    """Import an optional dependency, or raise MissingExtraError saying how to get it."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError as e:
        raise MissingExtraError(package, extra, feature) from e
