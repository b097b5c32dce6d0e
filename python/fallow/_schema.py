"""Results as JSON text with the schema version every ``--json`` of the CLI carries.

``fallow simulate --json`` (and every other ``--json``) opens with ``"schema_version"``
(``fallow_core::JSON_SCHEMA_VERSION``, bumped when a key changes meaning). A result's
``to_json()`` writes the same first key, so a file from Python and one from the CLI are read by
the same code and say which schema they follow.
"""

from __future__ import annotations

import json
from typing import Any

from fallow._fallow import SCHEMA_VERSION


def to_json(data: dict[str, Any], **kwargs: Any) -> str:
    """``data`` as JSON text, ``schema_version`` first (as the CLI writes it)."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **data}, **kwargs)
