"""No tracked file outside the written record refers to a tracker's issue by number.

The issue tracker is not part of the repository, so a reader of the code cannot follow
such a reference: a comment, help text or log message must point at a file in the
repository instead (docs/*.md, a test, a script). docs/ and README.md, the project's
written record, may keep issue numbers. A reference broken across two comment lines
counts too.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# "issue N", "Issue N's", "issues N", "issue #N" (N a number), and the same with the number
# on the next line after a comment marker
ISSUE_REF = re.compile(r"\b[Ii]ssues?(?: |[ \t]*\n[ \t]*(?://[/!]?|#|\*)?[ \t]*)#?\d+")


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the repository's .git to list the tracked files")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [p for p in out.decode().split("\0") if p]


def test_no_issue_numbers_outside_docs():
    found = []
    for rel in _tracked():
        if rel.startswith("docs/") or rel == "README.md":
            continue
        try:
            data = (ROOT / rel).read_bytes()
        except OSError:  # listed but not in the work tree
            continue
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", errors="replace")
        for m in ISSUE_REF.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{rel}:{line}: {m.group()!r}")
    assert not found, "issue numbers the repository cannot resolve:\n" + "\n".join(found)
