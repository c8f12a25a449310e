"""The generation chain in order: one stage module each (the contract is docs/environment.md)."""

from __future__ import annotations

import importlib

from mnemoflow.environment.base import Stage

#: Stage name -> its module (``STAGE`` in each), in the order they run. Written out in full so
#: that ``mnemoflow.codeversion`` follows them: a changed stage re-runs the generation jobs.
MODULES = {
    "profile": "mnemoflow.environment.profile",
    "questions": "mnemoflow.environment.questions",
    "schema": "mnemoflow.environment.schema",
    "initial_state": "mnemoflow.environment.initial_state",
    "periods": "mnemoflow.environment.periods",
    "answers": "mnemoflow.environment.answers",
    "queries": "mnemoflow.environment.queries",
}
ORDER = tuple(MODULES)


def chain() -> list[Stage]:
    """Every stage's ``STAGE``, in order (imported here so a missing module names itself)."""
    stages = [importlib.import_module(module).STAGE for module in MODULES.values()]
    for name, stage in zip(ORDER, stages, strict=True):
        if stage.name != name:
            raise RuntimeError(f"{MODULES[name]}.STAGE is named {stage.name!r}, not {name!r}")
    return stages
