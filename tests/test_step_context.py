"""The protocols' step context: one frozen object for what every step carries, so no protocol
function grows a dozen parameters again."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
from pathlib import Path

import pytest

from mnemoflow.llm.gateway import Gateway
from mnemoflow.memory.base import Message
from mnemoflow.protocols.step import StepContext

PROTOCOLS = Path(__file__).resolve().parent.parent / "mnemoflow" / "protocols"
#: Named parameters and ``*args`` (``self`` / ``cls`` and ``**kwargs`` do not count).
MAX_PARAMETERS = 8


def parameter_counts(root: Path) -> dict[str, int]:
    """``file:line name`` -> parameter count of every function and method under ``root``."""
    counts = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            counts[f"{path.name}:{node.lineno} {node.name}"] = len(names) + bool(args.vararg)
    return counts


def test_no_protocol_function_takes_more_than_eight_parameters():
    counts = parameter_counts(PROTOCOLS)
    # the walk reaches the step functions of every family
    for name in ("ingest", "answer", "ingest_step", "live_step", "run_step"):
        assert any(key.endswith(f" {name}") for key in counts), name
    over = {name: n for name, n in counts.items() if n > MAX_PARAMETERS}
    assert not over, f"protocol functions over {MAX_PARAMETERS} parameters: {over}"


def test_the_count_sees_star_args_and_keyword_only_but_not_self(tmp_path):
    (tmp_path / "m.py").write_text(
        "class A:\n    def f(self, a, *rest, b, **kw): ...\ndef g(a, b=1, /, c=2): ...\n",
        encoding="utf-8",
    )
    assert parameter_counts(tmp_path) == {"m.py:2 f": 3, "m.py:3 g": 3}


def test_the_context_is_frozen_and_builds_loads_and_ticks(tmp_path):
    ticks = []
    ctx = StepContext({"type": "bm25_message", "top_k": 2}, Gateway.from_config({}), seed=3,
                      progress=ticks.append)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.seed = 4  # type: ignore[misc]
    memory = ctx.build()
    message = Message("t1", "s1", "user", "I keep bees on the roof.", "Ana", "")
    asyncio.run(memory.add([message], {"step": 0}))
    (tmp_path / "e1").mkdir()
    memory.save(tmp_path / "e1")
    loaded = ctx.load(tmp_path / "e1")
    assert loaded.stored_ids() == memory.stored_ids() == {"t1"}
    ctx.tick(True)
    ctx.tick(None)
    StepContext({"type": "none"}, None).tick(True)  # no progress: nothing to call
    assert ticks == [True, None]
    other = ctx.with_spec({"type": "none"})
    assert other.system_spec == {"type": "none"} and other.seed == 3 and ctx.system_spec["top_k"]
    assert other.progress is ctx.progress and other.keys == {}
