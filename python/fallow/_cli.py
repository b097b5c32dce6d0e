"""The ``fallow`` command of the Python package.

``pip install fallow`` installs a ``fallow`` console script that runs this
:func:`main`: fallow's command line, the same Rust code as the ``fallow``
binary (``cargo install --path crates/fallow-cli``), compiled into the
extension module. ``python -m fallow`` runs it too.
"""

from __future__ import annotations

import os
import signal
import sys


def _relaunch() -> tuple[str, list[str]]:
    """How fallow can start itself again (the guardian of ``fallow run``,
    ``emulate-disk --detach``): the console script when that is how it was
    started, else this interpreter with ``-m fallow``."""
    script = sys.argv[0] if sys.argv else ""
    if (
        script
        and not script.endswith(".py")
        and os.path.isfile(script)
        and os.access(script, os.X_OK)
    ):
        return os.path.abspath(script), []
    return sys.executable, ["-m", "fallow"]


def main() -> None:
    """Run ``fallow`` with this process's arguments and exit with its status."""
    from fallow._fallow import _cli_main

    program, leading = _relaunch()
    # As the binary: Ctrl-C ends a command that does not handle it itself
    # (Python's handler would only set a flag the Rust code never reads).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(_cli_main(["fallow", *sys.argv[1:]], program, leading))
