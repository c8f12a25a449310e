"""One user's generation: the stages in order, each checkpointed, then the data.json user.

A stage's output is stored as ``checkpoint_dir/<stage>.json`` under a key hashing everything the
output depends on: the stage's name, the values of the knobs it reads, the public binding of its
roles (model, temperature, ...), the fingerprint of its code, the run seed, the persona and the
keys of the stages it needs. A rerun whose key is unchanged reuses the output with no model
call; a changed knob, binding or code changes that stage's key and, through the chained input
keys, exactly the keys of the stages downstream of it.

A stage that cannot satisfy its validators (:class:`StageFailed`) ends the user with a failure
record; a transport error propagates and fails the job, and a rerun resumes from the
checkpoints (and the gateway's response cache holds the replies of the interrupted stage).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.codeversion import code_version
from mnemoflow.data.tables import write_atomic_text
from mnemoflow.environment.assemble import assemble_user
from mnemoflow.environment.base import Stage, StageContext, StageFailed, StageLog
from mnemoflow.llm.gateway import Gateway

log = logging.getLogger("mnemoflow")

#: The offline backend's handlers: part of every offline stage's code (a changed heuristic is a
#: different output, as a changed prompt is).
OFFLINE_HANDLERS = "mnemoflow.llm.offline"


@dataclass(frozen=True)
class Failure:
    """A user the chain could not generate: the stage that gave up and why."""

    stage: str
    reason: str


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def stage_code(stage: Stage, offline: bool) -> str:
    """The fingerprint of the code a stage runs: its ``run`` function and everything it reaches
    (``mnemoflow.codeversion``), plus the offline handlers when one of its roles is offline. A
    function outside the package (a test's) is fingerprinted by its source."""
    run = stage.run
    module = getattr(run, "__module__", "")
    name = getattr(run, "__name__", "")
    if module.startswith("mnemoflow.") and "<" not in getattr(run, "__qualname__", "<"):
        entries = [f"{module}:{name}"]
        if offline:
            entries.append(OFFLINE_HANDLERS)
        return code_version(*entries)
    return _digest(inspect.getsource(run))


def stage_key(
    stage: Stage,
    knobs: Mapping[str, Any],
    gateway: Gateway,
    seed: int,
    persona: Mapping[str, Any],
    input_keys: Mapping[str, str],
) -> str:
    """What the stage's output depends on, hashed (see the module docstring)."""
    bindings = {role: gateway.specs[role].public() for role in stage.roles}
    offline = any(b["backend"] == "offline" for b in bindings.values())
    return _digest(
        {
            "stage": stage.name,
            "knobs": {name: knobs.get(name) for name in stage.knobs},
            "roles": bindings,
            "code": stage_code(stage, offline),
            "seed": seed,
            "persona": _digest(dict(persona)),
            "inputs": {name: input_keys[name] for name in stage.needs},
        }
    )


def _load(path: Path, key: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it was written under ``key``."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return stored if isinstance(stored, dict) and stored.get("key") == key else None


def _row(log_: StageLog, user: str, failure: Failure | None = None) -> dict[str, Any]:
    return {
        "user": user,
        **log_.row(),
        "failed": failure is not None,
        "reason": failure.reason if failure else "",
    }


async def generate_user(
    gateway: Gateway,
    persona: Mapping[str, Any],
    knobs: Mapping[str, Any],
    seed: int,
    checkpoint_dir: str | Path,
    stages: Sequence[Stage] | None = None,
    finish: Callable[[dict[str, Any], Mapping[str, Any], int], Any] = assemble_user,
) -> tuple[Any, list[dict[str, Any]]]:
    """The data.json user of ``persona`` (or a :class:`Failure`) and one report row per stage run.

    ``stages`` defaults to the chain of :mod:`mnemoflow.environment.stages`; a stage after a
    failed one does not run and has no row. ``finish(outputs, knobs, seed)`` makes the result
    from every stage's output (the data.json user; a test's chain returns its outputs).
    """
    if stages is None:
        from mnemoflow.environment.stages import chain

        stages = chain()
    user = str(persona["key"])
    folder = Path(checkpoint_dir)
    folder.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, Any] = {"persona": dict(persona)}
    keys: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    for stage in stages:
        missing = [name for name in stage.needs if name not in outputs]
        if missing:
            raise RuntimeError(f"stage {stage.name} needs {missing}, which run after it")
        key = stage_key(stage, knobs, gateway, seed, persona, keys)
        keys[stage.name] = key
        path = folder / f"{stage.name}.json"
        stored = _load(path, key)
        stage_log = StageLog(stage=stage.name)
        if stored is not None:
            outputs[stage.name] = stored["output"]
            stage_log.reused = True
            rows.append(_row(stage_log, user))
            log.info("user %s: stage %s reused from its checkpoint", user, stage.name)
            continue
        ctx = StageContext(gateway=gateway, knobs=knobs, user=user, seed=seed, log=stage_log)
        inputs = {"persona": outputs["persona"], **{n: outputs[n] for n in stage.needs}}
        try:
            output = await stage.run(ctx, inputs)
        except StageFailed as exc:
            failure = Failure(stage=stage.name, reason=exc.reason)
            rows.append(_row(stage_log, user, failure))
            log.warning("user %s failed at stage %s: %s", user, stage.name, exc.reason)
            return failure, rows
        output = json.loads(json.dumps(output, ensure_ascii=False))  # as a reuse would read it
        record = {"key": key, "stage": stage.name, "output": output, "log": stage_log.row()}
        write_atomic_text(path, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
        outputs[stage.name] = output
        rows.append(_row(stage_log, user))
        log.info(
            "user %s: stage %s in %d calls, %d validation failures, %d refinements",
            user,
            stage.name,
            stage_log.calls,
            len(stage_log.validation_failures),
            stage_log.refinements,
        )
    return finish(outputs, knobs, seed), rows
