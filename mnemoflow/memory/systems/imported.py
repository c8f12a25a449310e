"""``imported``: a system run outside mnemoflow, whose answers come from its published
per-question output file (``mnemoflow import`` writes the entry; ``eval/imported.py`` reads the
file in the answer job instead of asking the agent). As a memory it stores nothing."""

from __future__ import annotations

from pathlib import Path

from mnemoflow.memory.base import register
from mnemoflow.memory.params import Param, declare_params
from mnemoflow.memory.systems.none import NoMemory

#: The per-question output formats an imported system's file may have (``eval/imported.py``).
IMPORT_FORMATS = ("longmemeval", "locomo", "memorybench", "amemgym")
SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
#: ``format``, ``path`` and ``sha256`` have no default: the answer job refuses an entry without one
UNSET = {"type": "null"}


@register
class Imported(NoMemory):
    """Answers read from a published per-question output; no memory of its own."""

    name = "imported"
    # every parameter names the file the answer job reads: a change re-runs answering only
    defaults, params_schema = declare_params(
        format=Param(None, enum=[*IMPORT_FORMATS, None]),
        path=Param(None, anyOf=[{"type": "string", "minLength": 1}, UNSET]),
        sha256=Param(None, anyOf=[SHA256, UNSET]),
        key=Param(None, ["string", "null"]),
        retrievals=Param(
            None,
            ["object", "null"],
            properties={"path": {"type": "string", "minLength": 1}, "sha256": SHA256},
            required=["path", "sha256"],
            additionalProperties=False,
        ),
    )

    def save(self, directory: Path) -> None:
        (Path(directory) / "imported.txt").write_text("answers read from a file\n", "utf-8")

    def stored_ids(self) -> set[str] | None:
        return None  # what the published system stored is unknown: its misses are undiagnosed
