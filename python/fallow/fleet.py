"""Fleet sweeps: tune many policies on many traces at once, :func:`sweep`.

One task tunes one policy on one trace for every budget (the budgets share
simulations, as in :func:`fallow.tune`); tasks run in parallel on local
processes (default), a Dask cluster or Ray, and the answers come back as
one pandas DataFrame with one row per trace × policy × budget. Traces are
passed as paths and each worker reads its own, so nothing large crosses
process boundaries. Rows are in the order the traces, policies and budgets
were given, whatever order the tasks finish in, so every backend gives the
same frame.

>>> import os, tempfile
>>> import fallow, fallow.fleet
>>> path = os.path.join(tempfile.mkdtemp(), "m.csv")
>>> trace = fallow.synthetic(arrival="poisson", rate=30, requests=2_000,
...                          service="exp:10ms", seed=7)
>>> with open(path, "w") as f:  # an MSR-format file with completions
...     for t, c in zip(trace.arrival_ns, trace.completion_ns):
...         _ = f.write(f"{t // 100},h,0,Read,0,4096,{(c - t) // 100}\\n")
>>> frame = fallow.fleet.sweep([path], ["fixed-wait", "busy-bee"], ["1ms", "5%"],
...                            sizes="64KiB,256KiB", workers=2)
>>> print(frame[["policy", "budget", "status"]].to_string(index=False))
    policy budget status
fixed-wait    1ms     ok
fixed-wait     5%     ok
  busy-bee    1ms     ok
  busy-bee     5%     ok
>>> bool((frame.loc[frame["budget"] == "1ms", "fg_mean_added_delay_s"] <= 1e-3).all())
True
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from fallow.errors import ParameterError, require

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BACKENDS", "COLUMNS", "sweep"]

#: The execution engines :func:`sweep` runs on.
BACKENDS = ("local", "dask", "ray")

#: Columns of :func:`sweep`'s frame, in order.
COLUMNS = [
    "trace",  # the path as given (str)
    "device",  # the device tuned (filled in when the trace has one)
    "policy",  # the policy as given
    "budget",  # the budget as written back by fallow.tune ("1ms", "5%")
    "spec",  # best policy setting ("fixed-wait:t=17.1ms"), None if none
    "request_size_bytes",  # best BG request size
    "bg_throughput_bytes_per_s",
    "fg_mean_added_delay_s",
    "fg_slowdown",
    "fg_collision_rate",
    "status",  # "ok", "infeasible" (no setting meets the budget) or "error"
    "error",  # the error message when status is "error", else None
]

#: Keyword arguments of fallow.read_trace a per-trace options dict may hold.
_READ_OPTIONS = ("format", "skip_bad", "time_unit", "offset_unit_bytes", "size_unit_bytes")

TraceSpec = Union[str, os.PathLike, Sequence[Any]]


_GLOB_CHARS = "*?["


def _is_glob(path: str) -> bool:
    return any(c in path for c in _GLOB_CHARS) and not os.path.exists(path)


def _partition_key(name: str) -> int | str:
    """A ``device=…`` directory's device: its key percent-decoded (the
    encoding ``fallow convert --partition-by device`` writes), as an int
    when it is a decimal id (``device=17`` → 17, so a partition's rows
    carry the device as a sweep of the source file with ``(path, 17)``
    does), else the name (``device=hm%3A0`` → ``"hm:0"``)."""
    from urllib.parse import unquote

    key = unquote(name[len("device=") :], errors="strict")
    return int(key) if key.isascii() and key.isdigit() else key


def _part_number(file_name: str) -> int | None:
    stem = file_name[len("part-") : -len(".parquet")]
    ok = file_name.startswith("part-") and file_name.endswith(".parquet")
    return int(stem) if ok and stem.isascii() and stem.isdigit() else None


def _dataset_partitions(root: str) -> list[tuple[int | str, list[str]]]:
    """The partitions of a dataset written by ``fallow convert
    --partition-by device``: (device, its part files in part order), sorted
    by device (ids numerically, then names). A directory that holds no
    ``device=…`` partition, or a partition without ``part-N.parquet``
    files, is a ParameterError naming it."""
    partitions = []
    with os.scandir(root) as it:
        entries = sorted(e.name for e in it if e.is_dir() and e.name.startswith("device="))
    if not entries:
        raise ParameterError(
            f"{root}: a directory but not a partitioned dataset (no device=… directories; "
            "write one with `fallow convert FILE --partition-by device -o DIR`)"
        )
    for name in entries:
        where = os.path.join(root, name)
        numbered = []
        with os.scandir(where) as it:
            for e in it:
                n = _part_number(e.name)
                if n is not None and e.is_file():
                    numbered.append((n, e.path))
        if not numbered:
            raise ParameterError(f"{where}: a partition without part-N.parquet files")
        try:
            device = _partition_key(name)
        except UnicodeDecodeError as e:
            raise ParameterError(f"{where}: the device name is not percent-encoded UTF-8") from e
        partitions.append((device, [path for _, path in sorted(numbered)]))
    partitions.sort(key=lambda p: (isinstance(p[0], str), p[0]))
    return partitions


def _normalise_traces(
    traces: Iterable[TraceSpec], device: int | str | None
) -> list[tuple[str, int | str | None, dict[str, Any], list[str] | None]]:
    """Entries as (path, device, options, parts): ``parts`` is None for a
    trace file, or a partition's Parquet files for a dataset directory,
    which stands for one entry per partition (or the one named)."""
    out = []
    for item in [traces] if isinstance(traces, (str, os.PathLike)) else traces:
        options: dict[str, Any] = {}
        dev = device
        if isinstance(item, (str, os.PathLike)):
            path = item
        elif isinstance(item, Sequence) and 1 <= len(item) <= 3:
            path = item[0]
            if len(item) >= 2 and item[1] is not None:
                # an MSR `host:disk` name stays a str, for the core to resolve
                dev = item[1] if isinstance(item[1], str) else int(item[1])
            if len(item) == 3:
                if not isinstance(item[2], Mapping):
                    raise ParameterError(
                        f"trace {item!r}: the third item must be a dict of options"
                    )
                options = dict(item[2])
        else:
            raise ParameterError(
                f"trace {item!r}: expected a path, (path, device) or (path, device, options)"
            )
        path = os.fspath(path)
        if os.path.isdir(path):
            read = sorted(k for k in options if k in _READ_OPTIONS)
            if read:
                raise ParameterError(
                    f"{path}: a partitioned dataset is read as fallow's Parquet; "
                    f"{', '.join(read)} does not apply"
                )
            partitions = _dataset_partitions(path)
            if dev is not None:
                wanted = dev if isinstance(dev, int) or not dev.isdigit() else int(dev)
                partitions = [p for p in partitions if p[0] == wanted]
                if not partitions:
                    raise ParameterError(f"{path}: no partition device={dev}")
            out.extend((path, d, options, parts) for d, parts in partitions)
        elif _is_glob(path):
            import glob

            files = sorted(glob.glob(path))
            if not files:
                raise ParameterError(f"{path}: the pattern matches no file")
            out.extend((f, dev, options, None) for f in files)
        else:
            out.append((path, dev, options, None))
    return out


def _split(values: str | Iterable[str], what: str) -> list[str]:
    items = values.split(",") if isinstance(values, str) else [str(v) for v in values]
    items = [v.strip() for v in items if v.strip()]
    if not items:
        raise ParameterError(f"no {what} given")
    return items


def _row(
    path: str, device: int | str | None, policy: str, budget: str, **cells: Any
) -> dict[str, Any]:
    row = dict.fromkeys(COLUMNS)
    row.update(trace=path, device=device, policy=policy, budget=budget, **cells)
    return row


def _read_partition(parts: list[str]) -> Any:
    """One device's partition: its part files (part-0, part-1, … in that
    order) read by the extension's Parquet reader and joined. The reader
    puts each file's times relative to its own first arrival and reports
    that instant as ``origin_ns``, so a later part's times are moved by
    its origin's distance from part-0's: the joined columns are the
    source's requests of that device, in order, on one clock."""
    import numpy as np

    import fallow

    traces = [fallow._read_trace(p, format="parquet") for p in parts]
    if len(traces) == 1:
        return traces[0]
    origin_ns = traces[0].report["origin_ns"]
    joined: dict[str, list[Any]] = {}
    for t in traces:
        shift_ns = np.uint64(t.report["origin_ns"] - origin_ns)
        for name, column in t.columns().items():
            if column is not None:
                timed = name in ("arrival_ns", "completion_ns")
                joined.setdefault(name, []).append(column + shift_ns if timed else column)
    return fallow.Trace.from_columns(**{k: np.concatenate(v) for k, v in joined.items()})


def _tune_task(
    path: str,
    device: int | str | None,
    policy: str,
    budgets: list[str],
    options: dict[str, Any],
    errors: str,
    parts: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One task: read the trace, tune `policy` for all budgets, one row per budget.

    With ``parts`` (a partition of a dataset), only those files are read
    and ``device`` is the partition's name, written in the rows; the
    partition holds that device alone. Runs in a worker process;
    module-level so every backend can pickle it."""
    import fallow

    try:
        read_kw = {k: options[k] for k in _READ_OPTIONS if k in options}
        tune_kw = {k: v for k, v in options.items() if k not in _READ_OPTIONS}
        if parts is not None:
            trace = _read_partition(parts)
            tune_device = None
        else:
            trace = fallow.read_trace(path, **read_kw)
            if device is None:
                devices = trace.devices()
                if len(devices) == 1:
                    device = int(devices[0]["id"])
            tune_device = device
        results = fallow.tune(trace, policy, ",".join(budgets), device=tune_device, **tune_kw)
    except Exception as e:
        if errors == "raise":
            raise
        message = f"{type(e).__name__}: {e}"
        return [_row(path, device, policy, b, status="error", error=message) for b in budgets]
    if not isinstance(results, list):
        results = [results]
    rows = []
    for r in results:
        best = r.best
        if best is None:
            rows.append(_row(path, device, policy, r.budget, status="infeasible"))
            continue
        rows.append(
            _row(
                path,
                device,
                policy,
                r.budget,
                spec=best["spec"],
                request_size_bytes=best["request_size_bytes"],
                bg_throughput_bytes_per_s=best["bg_throughput_bytes_per_s"],
                fg_mean_added_delay_s=best["fg_mean_added_delay_s"],
                fg_slowdown=best["fg_slowdown"],
                fg_collision_rate=best["fg_collision_rate"],
                status="ok",
            )
        )
    return rows


def _run_local(tasks: list[tuple], workers: int | None) -> list[list[dict[str, Any]]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: a forked child of a process whose Rust thread pool is
    # running could deadlock.
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    try:
        futures = [pool.submit(_tune_task, *t) for t in tasks]
        _wait_interruptibly(futures)
        results = [f.result() for f in futures]
    except BaseException:
        # Ctrl-C (or a task's error): leaving a `with` block would wait for
        # every queued task (shutdown(wait=True)), so drop the queue and end
        # the running workers now (every long call stops promptly: test_interrupt.py)
        _end_workers(pool)
        raise
    pool.shutdown(wait=True)
    return results


def _wait_interruptibly(futures: list[Any]) -> None:
    """Wait for every future, or for the first error, in short timed waits.

    Not ``f.result()``: an untimed wait blocks in one lock acquire, and
    once polars is imported (polars 2.1 installs its own SIGINT handler,
    with SA_RESTART, chaining to Python's) the signal no longer interrupts
    that acquire, so Ctrl-C waited for the running task to end (CI: 12.6 s;
    here 15-20 s). A timed wait returns to the interpreter, which raises
    the pending KeyboardInterrupt."""
    from concurrent.futures import FIRST_EXCEPTION
    from concurrent.futures import wait as wait_for

    pending = set(futures)
    while pending:
        done, pending = wait_for(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done):
            return


def _end_workers(pool: Any) -> None:
    """Drop a process pool's queued tasks and kill its workers, reaping
    them. Python 3.14 has ``ProcessPoolExecutor.terminate_workers()``;
    before it, the workers are only reachable through the pool's
    ``_processes`` map (pid → Process), which ``shutdown`` clears, so it is
    read first. Killed, not terminated: a worker inside a Rust call may
    not act on SIGTERM before that call returns."""
    end = getattr(pool, "terminate_workers", None)
    if end is not None:
        end()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.kill()
    for p in processes:
        p.join(timeout=5)


def _run_dask(tasks: list[tuple], workers: int | None, client: Any) -> list[list[dict[str, Any]]]:
    distributed = require("distributed", "fleet", "fallow.fleet.sweep(backend='dask')")
    own = client is None
    cluster = None
    if own:
        cluster = distributed.LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
    try:
        futures = [client.submit(_tune_task, *t, pure=False) for t in tasks]
        # gather's own wait is a 10 s timed wait: poll so Ctrl-C is prompt
        # (see _wait_interruptibly)
        while not all(f.done() for f in futures):
            time.sleep(0.1)
        return client.gather(futures)
    finally:
        if own:
            client.close()
            cluster.close()


def _run_ray(tasks: list[tuple], workers: int | None) -> list[list[dict[str, Any]]]:
    ray = require("ray", "ray", "fallow.fleet.sweep(backend='ray')")
    own = not ray.is_initialized()
    if own:
        ray.init(
            num_cpus=workers or os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        remote = ray.remote(num_cpus=1)(_tune_task)
        refs = [remote.remote(*t) for t in tasks]
        # short waits, so Ctrl-C is raised promptly (see _wait_interruptibly)
        while len(ray.wait(refs, num_returns=len(refs), timeout=0.1)[0]) < len(refs):
            pass
        return ray.get(refs)
    finally:
        if own:
            ray.shutdown()


def sweep(
    traces: Iterable[TraceSpec] | TraceSpec,
    policies: str | Iterable[str],
    budgets: str | Iterable[str],
    backend: str = "local",
    *,
    device: int | str | None = None,
    bg: str = "size",
    sizes: str | int | list[int | str] | None = "64KiB..4MiB/10",
    max_delay: float | str | None = None,
    workers: int | None = None,
    client: Any = None,
    errors: str = "raise",
    **simulate_kwargs: Any,
) -> pd.DataFrame:
    """Tune every policy on every trace for every budget, in parallel.

    Args:
        traces: trace files (a path, or a list). An entry may be
            ``(path, device)`` or ``(path, device, options)`` where
            ``options`` (a dict) overrides ``simulate_kwargs`` for that trace
            and may hold :func:`fallow.read_trace` arguments (``format``,
            ``time_unit``, …) — e.g. ``{"service": "disk"}`` for a trace
            without completion times. Device None: the trace's only device.
            A directory is a dataset written by ``fallow convert FILE
            --partition-by device -o DIR``: one entry per ``device=…``
            partition (or only the one given as ``(DIR, device)``), each
            task reading only its partition's files; its rows carry the
            partition's device (an int id, or the name: ``"hm:0"``). A
            path with ``*``, ``?`` or ``[`` that is not a file is a glob:
            one entry per matching file, in sorted order.
        policies: policy specs (``"fixed-wait"``, ``"busy-bee:…"``) as for
            :func:`fallow.tune`, a list or comma-separated.
        budgets: ``"1ms"``, ``"5%"``, …, a list or comma-separated; all the
            budgets of a task are tuned together.
        backend: ``"local"`` (a process pool), ``"dask"`` (a
            ``dask.distributed`` LocalCluster of processes, or ``client=``),
            or ``"ray"`` (the running Ray, else a local ``ray.init``).
        device: the device of traces given without one (an id, or an MSR
            ``"host:disk"`` name such as ``"hm:0"``).
        bg: the BG service model (as for :func:`fallow.simulate`).
        sizes: candidate BG request sizes (as for :func:`fallow.tune`).
        max_delay: most delay one BG request may add to an FG request.
        workers: parallel tasks (default: the number of cores).
        client: an existing ``dask.distributed.Client`` (``backend="dask"``).
        errors: ``"raise"`` (default) re-raises a task's failure;
            ``"record"`` gives its rows status ``"error"`` and the message.
        **simulate_kwargs: more options of :func:`fallow.tune` /
            :func:`fallow.simulate` (``service``, ``bg_work``,
            ``switch_penalty``, ``seed``, ``threads`` (default 1 per task)).

    Returns:
        A DataFrame with the columns of :data:`COLUMNS`, one row per
        trace × policy × budget in the order given (traces outermost).

    Raises:
        ParameterError: an unknown backend or ``errors`` mode, a malformed
            trace entry, no policies or budgets, a directory that is not a
            dataset, a partition that is absent, a glob matching nothing.
        MissingExtraError: the backend's package is not installed
            (``pip install 'fallow[fleet]'`` for Dask, ``'fallow[ray]'`` for Ray).
    """
    import pandas

    if backend not in BACKENDS:
        e = ParameterError(
            f"unknown fleet backend {backend!r}: expected one of {', '.join(BACKENDS)}"
        )
        e.name = "backend"
        raise e
    if errors not in ("raise", "record"):
        raise ParameterError(f"errors must be 'raise' or 'record', not {errors!r}")
    if client is not None and backend != "dask":
        raise ParameterError("client= is for backend='dask'")
    entries = _normalise_traces(traces, device)
    policy_list = _split(policies, "policies")
    budget_list = _split(budgets, "budgets")
    base = dict(bg=bg, sizes=sizes, max_delay=max_delay, threads=1)
    base.update(simulate_kwargs)
    tasks = [
        (path, dev, policy, budget_list, {**base, **opts}, errors, parts)
        for path, dev, opts, parts in entries
        for policy in policy_list
    ]
    if not tasks:
        return pandas.DataFrame(columns=COLUMNS)
    if backend == "local":
        results = _run_local(tasks, workers)
    elif backend == "dask":
        results = _run_dask(tasks, workers, client)
    else:
        results = _run_ray(tasks, workers)
    # Results come back in task order (gathered by position), and each task's
    # rows in budget order: the frame does not depend on which task finished first.
    rows = [row for task_rows in results for row in task_rows]
    frame = pandas.DataFrame(rows, columns=COLUMNS)
    # ids as a nullable int column; MSR `host:disk` names keep it as objects
    if not any(isinstance(d, str) for d in frame["device"]):
        frame["device"] = frame["device"].astype("Int64")
    frame["request_size_bytes"] = frame["request_size_bytes"].astype("Int64")
    return frame
