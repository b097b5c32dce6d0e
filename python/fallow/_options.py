"""The keyword arguments of :func:`fallow.simulate`, :func:`fallow.compare`
and :func:`fallow.tune`, spelled once.

Each ``TypedDict`` here is the one definition: the public functions take
``**options: Unpack[...]`` (type checkers see every keyword and its type),
the stub of the compiled core (``_fallow.pyi``) refers to the same
classes, and :func:`keywords` gives the functions an explicit runtime
signature (``help()``, ``inspect.signature``, editors) from them. A keyword
left out or None keeps the core's default (``fallow_core::sim::Request``,
the CLI's too; listed by ``fallow._fallow.defaults()``), and the core
checks every value, naming the keyword at fault.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, ForwardRef, TypedDict, TypeVar

if TYPE_CHECKING:
    import os
    from collections.abc import Sequence

    from fallow._fallow import Trace

F = TypeVar("F", bound=Callable[..., Any])


class InputOptions(TypedDict, total=False):
    """The input and its BG work: the keywords every simulation takes."""

    workload: str | None
    device: int | str | None
    service: str | None
    arrival_rate: float | None
    utilization: float | None
    requests: int | None
    request_size: int | str | None
    write_fraction: float | None
    bg: str | None
    bg_size: int | str | None
    bg_work: str | None
    switch_penalty: float | str | None
    seed: int | None


class SimulateOptions(InputOptions, total=False):
    """:func:`fallow.simulate`'s keywords: the input, online re-tuning, and
    a second trace played after the first."""

    retune: str | None
    retune_window: int | None
    retune_every: int | None
    then: Trace | None
    then_device: int | str | None
    gap: float | str | None


class PageOptions(TypedDict, total=False):
    """Where to write the CLI's ``--html`` page as well (``html``), and
    whether it may replace a file fallow did not write (``overwrite``)."""

    html: str | os.PathLike[str] | None
    overwrite: bool | None


class CompareOptions(InputOptions, PageOptions, total=False):
    """:func:`fallow.compare`'s keywords: the input, the threads the
    line-up runs on (``fallow compare --threads``), and its page."""

    threads: int | None


class TuneOptions(InputOptions, total=False):
    """:func:`fallow.tune`'s keywords: the search, and the input."""

    sizes: str | int | Sequence[int | str] | None
    max_delay: float | str | None
    threads: int | None
    search: str | None


class ParetoOptions(InputOptions, PageOptions, total=False):
    """:func:`fallow.pareto`'s keywords: the input (``bg_size`` is the
    request size swept at), the threads, and its page."""

    threads: int | None


class RecommendOptions(InputOptions, total=False):
    """:func:`fallow.recommend`'s keywords: the search, and the input."""

    sizes: str | int | Sequence[int | str] | None
    max_delay: float | str | None
    threads: int | None
    search: str | None


def keywords(options: type) -> Callable[[F], F]:
    """Give the decorated ``f(..., **options)`` the explicit signature of
    its positional parameters followed by the keyword-only parameters of
    ``options`` (a TypedDict above), each defaulting to None."""

    def decorate(f: F) -> F:
        sig = inspect.signature(f)
        head = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
        tail = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=kind.__forward_arg__ if isinstance(kind, ForwardRef) else kind,
            )
            for name, kind in options.__annotations__.items()
        ]
        f.__signature__ = sig.replace(parameters=head + tail)  # type: ignore[attr-defined]
        return f

    return decorate


def given(options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments given (not None): the others keep the core's defaults."""
    return {k: v for k, v in options.items() if v is not None}
