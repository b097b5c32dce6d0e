"""Disk energy management and SARD in simulation: :func:`energy`.

The Python side of ``fallow energy`` (docs/energy.md): a trace is replayed
through a disk's power states (busy, idle, shutdown, standby, spin-up; the
WD2500JD of the SARD paper's Table III unless ``power=`` says otherwise)
under spin-down policies, on the standalone disk and with a share of the
requests served by peers while the disk sleeps. The simulation runs in
Rust with the GIL released; the result holds exactly the JSON of
``fallow energy --json``.

The trace worked by hand in ``tests/data/cli/energy.csv``: eight 1 s reads
at 0, 5, 30, 42, 57, 60, 70.5 and 83 s. Under a 10 s timeout the disk
spins down in the gaps after 6, 43 and 71.5 s; the reads at 30 and 57 s
wait for a 9 s spin-up, the one at 83 s arrives during the 4 s shutdown
and waits 11.5 s:

>>> import fallow
>>> s = 1_000_000_000
>>> at = [0, 5, 30, 42, 57, 60, 70.5, 83]
>>> trace = fallow.from_columns([int(a * s) for a in at],
...                             completion_ns=[int(a * s) + s for a in at],
...                             offset_bytes=[4096 * i for i in range(8)],
...                             size_bytes=[4096] * 8)
>>> r = fallow.energy(trace, policy="timeout:t=10s", local_fraction=[1, 0.5])
>>> alone, sard = r["runs"]
>>> alone["spinups"], alone["exposed_delay_s"], alone["energy_j"]["total"]  # J
(3, 29.5, 952.5)
>>> alone["energy_j"]["power_cycle"], 3 * (148.5 + 6.4)  # three shutdowns and spin-ups
(464.7, 464.7)

With half the reads kept local, a peer serves one of the others, which
arrives while the disk sleeps: one spin-up less, 9 s less delay,
less energy. ``r.runs`` is the table:

>>> r.runs[["setting", "spinups", "exposed_delay_s", "remote_requests"]].values.tolist()
[['100 % local', 3, 29.5, 0], ['50 % local', 2, 20.5, 1]]
>>> sard["vs_standalone"]["energy"] < 1
True
>>> round(r["break_even_s"], 2)  # (148.5 + 6.4 - 1.8 * 4) J / (10 - 1.8) W
18.01
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from fallow import _fallow, _schema

if TYPE_CHECKING:
    import pandas as pd

    from fallow._fallow import Trace

__all__ = ["EnergyResult", "energy"]

#: Columns of :attr:`EnergyResult.runs`, in order: (column, path in a run).
RUN_COLUMNS: list[tuple[str, str]] = [
    ("policy", "policy"),
    ("setting", "setting"),
    ("local_fraction", "local_fraction"),
    ("requests", "requests"),
    ("local_requests", "local_requests"),
    ("idle_periods", "idle_periods"),
    ("mean_idle_s", "mean_idle_s"),
    ("idle_intervals", "idle_intervals"),
    ("spinups", "spinups"),
    ("shutdowns", "shutdowns"),
    ("exposed_delay_s", "exposed_delay_s"),
    ("exposed_delay_per_request_s", "exposed_delay_per_request_s"),
    ("delayed_requests", "delayed_requests"),
    ("energy_j", "energy_j.total"),
    ("busy_j", "energy_j.busy"),
    ("idle_j", "energy_j.idle"),
    ("power_cycle_j", "energy_j.power_cycle"),
    ("standby_j", "energy_j.standby"),
    ("edp", "edp"),
    ("span_s", "span_s"),
    ("remote_requests", "remote.requests"),
    ("remote_mean_response_s", "remote.mean_response_s"),
    ("server_requests", "server.requests"),
    ("energy_vs_standalone", "vs_standalone.energy"),
    ("exposed_delay_vs_standalone", "vs_standalone.exposed_delay"),
    ("idle_periods_vs_standalone", "vs_standalone.idle_periods"),
    ("edp_vs_standalone", "vs_standalone.edp"),
    ("energy_vs_always_on", "vs_always_on.energy"),
    ("edp_vs_always_on", "vs_always_on.edp"),
    ("bg_done_bytes", "bg.done_bytes"),
    ("bg_busy_s", "bg.busy_s"),
    ("bg_extra_energy_j", "bg.extra_energy_j"),
    ("bg_fg_delayed_requests", "bg.fg_delayed_requests"),
]


def _get(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted path; None where a part is missing or null (no BG work)."""
    for key in path.split("."):
        if data is None:
            return None
        data = data[key]
    return data


class EnergyResult:
    """An energy study (the JSON of ``fallow energy --json``).

    Attributes:
        data: the plain result: ``input`` (``path``, ``kind`` ``block`` or
            ``file``, ``device``, ``requests``, ``disk_requests``,
            ``mandatory_local``, ``span_s``, ``completions``, ``seed``),
            ``power`` (the model: ``read_write_w``, ``seek_w``, ``idle_w``,
            ``standby_w``, ``spinup_j``, ``spinup_ns``, ``shutdown_j``,
            ``shutdown_ns``, ``name``), ``break_even_s``, ``network``,
            ``remote_when``, ``bg`` (the plan, or None) and ``runs``: one per
            policy and setting, each policy's standalone run first, with
            ``idle_periods``, ``mean_idle_s``, ``spinups``,
            ``exposed_delay_s``, ``exposed_delay_per_request_s``,
            ``energy_j`` (``busy``, ``idle``, ``power_cycle``, ``standby``,
            ``total``), ``time_s``, ``edp``, ``remote``, ``server``, ``bg``,
            ``vs_standalone`` and ``vs_always_on`` (ratios), ….
    """

    def __init__(self, data: dict[str, Any]):
        self.data = data

    def __repr__(self) -> str:
        i = self.data["input"]
        where = f" device {i['device']}" if i["device"] is not None else ""
        policies = list(dict.fromkeys(r["policy"] for r in self.data["runs"]))
        return (
            f"<fallow.EnergyResult {os.path.basename(i['path'])}{where}: "
            f"{len(self.data['runs'])} runs of {', '.join(policies)}>"
        )

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run, in the order of ``data["runs"]``, with the columns
        of ``fallow.power.RUN_COLUMNS``: ``policy``, ``setting``,
        ``local_fraction``, ``idle_periods``, ``mean_idle_s``, ``spinups``,
        ``exposed_delay_s``, ``exposed_delay_per_request_s``, energy
        (``energy_j`` the total, ``busy_j``, ``idle_j``, ``power_cycle_j``,
        ``standby_j``), ``edp``, ``remote_requests``, the ratios
        ``energy_vs_standalone``, ``exposed_delay_vs_standalone``,
        ``edp_vs_standalone``, ``energy_vs_always_on``, ``edp_vs_always_on``,
        and the BG work (``bg_done_bytes``, …; missing without ``bg_work``)."""
        import pandas

        rows = [[_get(r, p) for _, p in RUN_COLUMNS] for r in self.data["runs"]]
        return pandas.DataFrame(rows, columns=[c for c, _ in RUN_COLUMNS])

    @property
    def break_even_s(self) -> float:
        """Break-even idle time of the power model, seconds: an idle interval
        longer than this saves energy if the disk spins down at its start."""
        return self.data["break_even_s"]

    def to_json(self, **kwargs: Any) -> str:
        """The result as JSON text (the schema of ``fallow energy --json``)."""
        return _schema.to_json(self.data, **kwargs)


PathLike = Union[str, "os.PathLike[str]"]


def energy(
    trace: Trace | PathLike,
    *,
    policy: str | Sequence[str] | None = "timeout:t=10s",
    device: int | str | None = None,
    local_fraction: float | Sequence[float] | None = None,
    peers: int | None = None,
    peer_prob: float | None = None,
    peer_prob_for: Mapping[str, float] | None = None,
    remote: str = "asleep",
    files: bool = False,
    user_data: str | None = None,
    service: str | None = None,
    power: PathLike | Mapping[str, float | str] | None = None,
    net_latency: float | str | None = None,
    net_bandwidth: int | str | None = None,
    net_contention: float = 0.2,
    bg_work: int | str | None = None,
    bg_size: int | str | None = None,
    bg: str | None = None,
    bg_wait: float | str | None = None,
    seed: int = 1,
    html: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> EnergyResult:
    """Simulate disk spin-down, alone and with peers serving requests while
    the disk sleeps (SARD), as ``fallow energy`` does.

    Every argument is a flag of ``fallow energy`` (docs/energy.md has the
    semantics and the SARD paper's sections); given the same input and options,
    the result equals ``fallow energy --json``.

    Args:
        trace: a :class:`fallow.Trace`, or the path of a trace file (read
            with :func:`fallow.read_trace`'s defaults; read it yourself for
            ``format=``, ``skip_bad=``, …). With ``files=True``, the path of
            a file-level CSV (``time_s,path,offset,size,op,kind``).
        policy: the spin-down policy, ``"NAME[:k=v,...]"``: ``"timeout:t=10s"``,
            ``"adaptive"``, ``"predictive"``, ``"always-on"``; a list runs
            several; None runs every policy (the CLI's default).
        device: the device of a block trace, an id or an MSR ``"hm:0"``
            (default: the busiest, as the
            CLI; ``result["input"]["device"]`` says which).
        local_fraction: shares of requests that stay local, the rest may be
            served by peers: a number or a list (default: 1, 0.15, 0.1, 0.05,
            0.02, 0.01, the SARD paper's rows). 100 % local is the standalone disk.
        peers: a peer model instead of fixed shares: this many peers, each
            holding an application file (a 1 MiB extent of a block trace)
            with probability ``peer_prob`` (0.1).
        peer_prob_for: per application (file-level traces): ``{path prefix:
            probability}``, the longest matching prefix wins.
        remote: ``"asleep"`` (peer-held requests go to the peer only while
            the disk is off, SARD §III-E) or ``"always"``.
        files: ``trace`` is a file-level CSV.
        user_data: with ``files=True``, ``"local"`` (user files are on the
            local disk) or ``"server"`` (a central file server).
        service: service model for traces without completion times (and for
            file-level traces, default ``"disk"``): ``"const:5ms"``,
            ``"exp:5ms"``, ``"disk[:rpm=7200,...]"``.
        power: the power model: a TOML file (the CLI's ``--power``, with
            ``[device.N]`` tables) or a dict overriding the WD2500JD
            (``{"idle_w": 8.0, "spinup_s": 6}``; keys ``read_write_w``,
            ``seek_w``, ``idle_w``, ``standby_w``, ``spinup_j``,
            ``spinup_s``, ``shutdown_j``, ``shutdown_s``, ``name``).
        net_latency: network latency per remote request (seconds or
            ``"200us"``, the default).
        net_bandwidth: bytes per second (or ``"125MB"``, the default: 1 Gbit/s).
        net_contention: largest slowdown of a transfer by contention (0.2).
        bg_work: BG work to fit into the time the disk spins anyway (bytes or
            ``"1GiB"``); ``bg_size`` (``"64KiB"``), ``bg`` (BG service model,
            ``"size"``) and ``bg_wait`` (``"100ms"``) shape it.
        seed: seed of the choice of local requests, the peer draws and the
            network contention.
        html: also write ``fallow energy --html``'s page to this path (the
            CLI's page, byte for byte, written atomically; checked before
            the study as the CLI checks ``--html``: never the trace, the
            power file, a device node or a FIFO, nor a file fallow did not
            write unless ``overwrite=True``).
        overwrite: let ``html`` replace a file fallow did not write.

    Returns:
        An :class:`EnergyResult`; ``.runs`` is the table as a DataFrame.

    Raises:
        ParameterError: an unknown policy, a share or probability outside
            [0, 1], a bad power key or value, an option that needs another
            (``peer_prob`` without ``peers``, ``bg_size`` without
            ``bg_work``, ``user_data`` without ``files``); ``.name`` is the
            argument.
        TraceFormatError: a malformed trace, file-level CSV or power TOML
            file (``.path``, ``.line``, ``.field``).
        FallowError: a trace without completion times and no ``service``.
        OSError: a file cannot be read.
    """
    if not files and isinstance(trace, (str, os.PathLike)):
        from fallow import read_trace

        trace = read_trace(trace)
    return EnergyResult(
        _fallow.energy(
            trace,
            policy=policy,
            device=device,
            local_fraction=local_fraction,
            peers=peers,
            peer_prob=peer_prob,
            peer_prob_for=None if peer_prob_for is None else dict(peer_prob_for),
            remote=remote,
            files=files,
            user_data=user_data,
            service=service,
            power=dict(power) if isinstance(power, Mapping) else power,
            net_latency=net_latency,
            net_bandwidth=net_bandwidth,
            net_contention=net_contention,
            bg_work=bg_work,
            bg_size=bg_size,
            bg=bg,
            bg_wait=bg_wait,
            seed=seed,
            html=html,
            overwrite=overwrite,
        )
    )
