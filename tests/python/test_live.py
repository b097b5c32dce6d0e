"""`fallow.live.scrub` (docs/live.md, "From Python"): Python takes the same budget as
`fallow scrub --budget`, through the same settings, session and document.
Each scrub reads a file in a temporary directory; its checkpoint and
learned window are written there too."""

import json
import os

import pytest

fallow = pytest.importorskip("fallow")

MIB = 1 << 20


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "data.bin"
    p.write_bytes(os.urandom(4 * MIB))
    return p


def test_a_scrub_returns_what_the_cli_prints(data_file, tmp_path, cli_json):
    """The same settings give the same document as `fallow scrub --json`:
    the same keys, the whole file read."""
    py = fallow.live.scrub(
        data_file, policy="fixed-wait:t=1ms", checkpoint=tmp_path / "py.json", buffered=True
    )
    cli = cli_json(
        "scrub",
        str(data_file),
        "--policy",
        "fixed-wait:t=1ms",
        "--checkpoint",
        str(tmp_path / "cli.json"),
        "--buffered",
    )
    # the data of the document; `schema_version` is fallow.SCHEMA_VERSION
    assert cli["schema_version"] == fallow.SCHEMA_VERSION
    assert py.keys() == cli.keys() - {"schema_version"}
    assert py["scrubbed_bytes"] == cli["scrubbed_bytes"] == 4 * MIB
    assert py["complete"] and cli["complete"]
    assert py["bad_ranges"] == cli["bad_ranges"] == []
    for key in ("target_bytes", "target_kind", "policy", "policy_from", "outcome", "direct_io"):
        assert py[key] == cli[key], key
    assert py["policy_from"] == "--policy"


def test_a_budgeted_scrub_starts_and_stops_on_ctrl_c(tmp_path, interrupted_within):
    """budget= opens a budgeted session and Ctrl-C ends it. The session
    starts at the least aggressive setting (t=100s), but a disk that other
    work keeps busy gives the tuner its 50 idle intervals within a second,
    and a refit may then read a small file at once: in one scripts/test.sh
    run (the fuzz job writing beside pytest) a 4 MiB file was read and the
    call returned before the signal. 16 MiB at max_rate 1 MiB/s lasts at
    least 12 s whatever the refits choose, so the run is still going when
    the signal comes."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(16 * MIB))
    interrupted_within(
        lambda: fallow.live.scrub(
            big,
            budget="5%",
            max_rate="1MiB/s",
            checkpoint=tmp_path / "py.json",
            buffered=True,
        ),
        1.0,
        after_s=1.0,
    )


def test_a_budget_beside_a_tune_result_is_refused(data_file, tmp_path, cli_json):
    tuned = tmp_path / "tune.json"
    result = cli_json(
        "tune",
        "--workload",
        "poisson",
        "--requests",
        "2000",
        "--service",
        "exp:5ms",
        "--utilization",
        "0.2",
        "--policy",
        "fixed-wait",
        "--budget",
        "1ms",
        "--sizes",
        "64KiB",
    )
    import json

    tuned.write_text(json.dumps(result))
    # named as Python spells it, not as the command line does
    with pytest.raises(
        fallow.ParameterError, match=r'^budget="5%" and the tune result .* together'
    ):
        fallow.live.scrub(data_file, budget="5%", tuned=tuned, checkpoint=tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(
    ("kwargs", "name", "text"),
    [
        ({"order": "diagonal"}, "order", "sequential"),
        ({"resume": True, "restart": True}, "resume", "give one of them"),
        ({"windows": 5}, "windows", "daily window"),
        ({"size": "12 apples"}, "size", "unknown unit"),
        ({"budget": "5 apples"}, None, "budget"),
    ],
)
def test_wrong_settings_name_themselves(data_file, tmp_path, kwargs, name, text):
    with pytest.raises(fallow.ParameterError, match=text) as e:
        fallow.live.scrub(data_file, checkpoint=tmp_path / "c.json", **kwargs)
    if name is not None:
        assert e.value.name == name


def test_native_targets_are_sent_to_the_command_line():
    with pytest.raises(fallow.ParameterError, match="command line only"):
        fallow.live.scrub("btrfs:/mnt")


def test_a_missing_target_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        fallow.live.scrub(tmp_path / "absent.bin", checkpoint=tmp_path / "c.json")


def test_sigint_stops_a_scrub_with_its_checkpoint_and_resume_finishes_it(
    tmp_path, interrupted_within
):
    """Ctrl-C ends the call with KeyboardInterrupt after the checkpoint is
    written; resume=True then reads the rest, not the whole file again."""
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(64 * MIB))
    checkpoint = tmp_path / "big.json"

    def scrubbed_some() -> bool:
        # the checkpoint is written as the scrub goes; SIGINT once it holds
        # progress (a CI run at load once sent it 0.5 s in, before the
        # first read: the test then resumed from 0)
        try:
            return json.loads(checkpoint.read_text())["scrubbed_bytes"] > 0
        except (OSError, ValueError, KeyError):
            return False

    # 64 MiB at 4 MiB/s: 16 s uninterrupted
    interrupted_within(
        lambda: fallow.live.scrub(big, max_rate="4MiB/s", checkpoint=checkpoint, buffered=True),
        1.0,
        when=scrubbed_some,
    )
    assert checkpoint.is_file()
    r = fallow.live.scrub(big, checkpoint=checkpoint, resume=True, buffered=True)
    assert r["complete"]
    assert r["scrubbed_bytes"] == 64 * MIB
    assert 0 < r["resumed_from_bytes"] < 64 * MIB
    assert r["run_bytes"] == 64 * MIB - r["resumed_from_bytes"]
