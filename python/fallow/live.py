"""Live maintenance from Python: :func:`scrub` reads a block device or a
file in the idle time a policy picks, or holds a foreground budget learned
as it runs, with no trace and no tune result (``budget="5%"``);
:func:`scrub_plan` says which scrub order and region count to give it
(``fallow scrub-plan``). :func:`scrub` is
``fallow scrub TARGET``: the same settings (a config file,
``FALLOW_BUDGET``, the defaults) resolved by the same library, the same
session, the same checkpoint, and the same document as ``--json``
(docs/live.md).

>>> import os, tempfile
>>> import fallow.live
>>> d = tempfile.mkdtemp()
>>> path = os.path.join(d, "data.bin")
>>> with open(path, "wb") as f:
...     _ = f.write(os.urandom(4 << 20))
>>> r = fallow.live.scrub(path, policy="fixed-wait:t=1ms", buffered=True,
...                       checkpoint=os.path.join(d, "scrub.json"))
>>> r["scrubbed_bytes"] == 4 << 20, r["complete"], r["bad_ranges"]
(True, True, [])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fallow import _fallow

__all__ = ["scrub", "scrub_plan"]


def scrub(
    target: str | os.PathLike[str],
    *,
    budget: str | None = None,
    policy: str | None = None,
    tuned: str | os.PathLike[str] | None = None,
    config: str | os.PathLike[str] | None = None,
    size: int | str | None = None,
    order: str | None = None,
    regions: int | None = None,
    max_rate: str | None = None,
    windows: str | Sequence[str] | None = None,
    max_bytes: int | str | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_interval: float | str | None = None,
    resume: bool = False,
    restart: bool = False,
    monitor: str | None = None,
    interval: float | str | None = None,
    seed: int | None = None,
    verify: str | None = None,
    buffered: bool = False,
    log: str | os.PathLike[str] | None = None,
    retries: int | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Scrub ``target`` (a block device or a file) read-only in its idle
    time, as ``fallow scrub TARGET`` does; returns the document
    ``fallow scrub --json`` prints (``scrubbed_bytes``, ``complete``,
    ``bad_ranges``, ``policy``, ``policy_from``, ``outcome``, ``monitor``,
    ``driver`` with a budget's measurements under ``driver["budget"]``,
    ``warnings``), without its ``schema_version`` (that is
    :data:`fallow.SCHEMA_VERSION`).

    Args:
        target: the device or file. ``btrfs:``, ``zfs:``, ``md:`` and
            ``fstrim:`` targets run from the command line only.
        budget: hold the FG slowdown within this budget (``"5%"``,
            ``"1ms"``) with no tune result: the policy's knob and request
            size are refitted live (docs/live.md, "Holding a budget").
            Not with ``tuned``. Else ``FALLOW_BUDGET`` or the config's.
        policy: the policy spec (``"fixed-wait:t=100ms"``).
        tuned: a ``fallow tune --json`` result: its best policy and size.
        config: a TOML config file (``[live]``, ``[scrub]`` tables).
        size: request size (bytes or ``"1MiB"``).
        order: ``"sequential"`` or ``"staggered"`` (with ``regions``).
        max_rate: a ceiling such as ``"50MB/s"``.
        windows: daily windows such as ``"01:00-06:00"`` (or a list).
        max_bytes: stop this run after this many bytes.
        checkpoint: the checkpoint file (default: under the state
            directory, named after the target); ``resume=True`` continues
            from it, ``restart=True`` starts a new pass.
        monitor: ``"auto"``, ``"none"``, a device name or a stat file.
        interval: the monitor's sampling interval (seconds or ``"10ms"``).
        verify: ``"off"``, ``"auto"`` or ``"required"`` (SCSI VERIFY).
        buffered: read through the page cache instead of ``O_DIRECT``.
        log: a per-request JSON-lines log. ``overwrite``: replace an
            output fallow does not recognise as its own.

    Ctrl-C stops the scrub at its next step; the checkpoint is written
    before ``KeyboardInterrupt`` is raised, so ``resume=True`` continues.
    A wrong setting raises :class:`fallow.ParameterError` naming it.
    """
    options = {
        "budget": budget,
        "policy": policy,
        "tuned": os.fspath(tuned) if tuned is not None else None,
        "config": os.fspath(config) if config is not None else None,
        "size": size,
        "order": order,
        "regions": regions,
        "max_rate": max_rate,
        "windows": windows,
        "max_bytes": max_bytes,
        "checkpoint": os.fspath(checkpoint) if checkpoint is not None else None,
        "checkpoint_interval": checkpoint_interval,
        "resume": resume,
        "restart": restart,
        "monitor": monitor,
        "interval": interval,
        "seed": seed,
        "verify": verify,
        "buffered": buffered,
        "log": os.fspath(log) if log is not None else None,
        "retries": retries,
        "overwrite": overwrite,
    }
    return _fallow.scrub(os.fspath(target), **options)


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
    """The mean latent error time (MLET: how long a burst of latent sector
    errors stays undetected) and the pass time of a sequential scrub and of
    staggered ones over ``regions``, at each segment (request) size, with
    the recommended order per size: ``fallow scrub-plan --json`` without
    its ``schema_version`` (docs/scrub-plan.md has the model). Arguments
    left out take the command's defaults: Practical Scrubbing's 300 GB
    15K rpm disk, 4 MiB bursts, 64 KiB and 1 MiB segments, regions 16, 128,
    1024 and 8192.

    Args:
        capacity: bytes scrubbed (``"4TB"``).
        segments: request sizes (``[65536, "1MiB"]``).
        regions: region counts of the staggered order.
        burst_span: bytes one burst of errors covers.
        rpm, rate, full_stroke: the spindle speed, the media rate
            (bytes/s) and the full-stroke seek time (``"8ms"``).
        duty: the fraction of the time spent scrubbing.
        check: also estimate every figure by a Monte Carlo of this many
            bursts (``monte_carlo`` in each row), with ``seed``.

    Returns:
        ``disk``, ``burst_span_bytes``, ``rows`` (one per plan: ``plan``,
        ``pass_s``, ``mlet_s``, ``mlet_vs_sequential``, ...) and
        ``recommended`` (one per segment size). A wrong value raises
        :class:`fallow.ParameterError` naming it.

    >>> import fallow.live
    >>> p = fallow.live.scrub_plan(regions=[128], segments=["64KiB"])
    >>> [r["plan"]["order"] for r in p["rows"]]
    ['sequential', 'staggered']
    >>> p["recommended"][0]["mlet_vs_sequential"] < 1
    True
    """
    return _fallow.scrub_plan(
        capacity=capacity,
        segments=segments,
        regions=regions,
        burst_span=burst_span,
        rpm=rpm,
        rate=rate,
        full_stroke=full_stroke,
        duty=duty,
        check=check,
        seed=seed,
    )
