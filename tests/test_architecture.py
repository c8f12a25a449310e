"""docs/architecture.md's "How to add" examples, built from the page itself and run offline.

Each example's code blocks are executed as the throwaway modules they stand for, into copies of
the registries they fill (so nothing leaks into other tests), and then used the way the workflow
uses them: a memory system built, fed and saved; a loader's tables read; a judge asked; a
MemoryBench family scored under both protocols. Every path a "Files touched" list names exists,
except the example's own new files.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.memory_support import REPO, gateway, run

DOC = REPO / "docs" / "architecture.md"
#: The examples' own new files, which the repository does not hold.
EXAMPLE_FILES = ("/gist.py", "/mybench.py", "/test_data_mybench.py")


def section(title: str) -> str:
    """The text of the "### … <title>" section."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"### … {title}\n")
    end = min(i for i in (text.find("\n### ", start + 1), text.find("\n## ", start + 1), len(text))
              if i >= 0)  # fmt: skip
    return text[start:end]


def blocks(title: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section(title), re.S)


def load_example(code: str, name: str) -> dict:
    """Run one code block as the module it stands for; its namespace."""
    namespace = {"__name__": f"architecture_example_{name}"}
    exec(compile(code, f"{DOC}:{name}", "exec"), namespace)
    return namespace


@pytest.fixture
def registries(monkeypatch):
    """Copies of every registry the examples add to (built-ins loaded first), thrown away after."""
    from mnemoflow.data.registry import LOADERS
    from mnemoflow.eval.benchmark_metric import JUDGES
    from mnemoflow.eval.memorybench.memorybench_metrics import FAMILIES
    from mnemoflow.llm import offline
    from mnemoflow.memory.base import SYSTEMS

    for registry in (SYSTEMS, LOADERS, JUDGES, FAMILIES):
        registry.names()
        monkeypatch.setattr(registry, "entries", dict(registry.entries))
    offline._load_handlers()
    monkeypatch.setattr(offline, "HANDLERS", dict(offline.HANDLERS))
    monkeypatch.setattr(offline, "READS", dict(offline.READS))


@pytest.mark.parametrize(
    "title", ["a memory system", "a benchmark loader", "a judge", "a MemoryBench metric family"]
)
def test_every_file_an_example_touches_exists(title):
    text = section(title)
    paths = set(re.findall(r"`((?:mnemoflow|tests|docs)/[\w/.]+\.(?:py|md))`", text))
    assert paths, title
    missing = [p for p in paths if not (REPO / p).is_file() and not p.endswith(EXAMPLE_FILES)]
    assert not missing, f"{title}: {missing}"


def test_a_memory_system_with_its_own_model_task(registries, tmp_path):
    from mnemoflow.memory.base import Message, build, resolve, stage_roles

    system_code, handler_code = blocks("a memory system")
    example = load_example(system_code, "gist")
    assert resolve("gist") is example["Gist"]
    assert stage_roles({"type": "gist"}, "ingest") == ("memory_writer",)
    assert stage_roles({"type": "gist"}, "query") == ()
    messages = [
        Message("t0", "s0", "user", "I moved to Lisbon in May. It is sunny.", "user"),
        Message("t1", "s0", "assistant", "Lisbon is lovely.", "assistant"),
        Message("t2", "s0", "user", "My sister Ana visits in June.", "user"),
    ]
    llm = gateway()
    # without its offline twin the offline backend refuses the task, naming it
    with pytest.raises(Exception, match="memory_gist"):
        run(build({"type": "gist"}, llm=llm).add(messages))

    load_example(handler_code, "gist_handler")
    system = build({"type": "gist", "update_batch": 2}, llm=llm)
    run(system.add(messages))
    items = run(system.retrieve("where does the user live?"))
    assert [item.source_ids for item in items] == [["t2"], ["t0", "t1"]]
    assert [item.text for item in items] == [
        "user: My sister Ana visits in June.",
        "user: I moved to Lisbon in May.",
    ]
    system.save(tmp_path)
    again = build({"type": "gist", "update_batch": 2}, llm=None)
    again.load(tmp_path)
    assert run(again.retrieve("anything", 1)) == items[:1]


RECORDS = [
    {
        "id": "e1",
        "turns": [
            {"role": "user", "content": "My cat is called Miso."},
            {"role": "assistant", "content": "Miso is a sweet name."},
        ],
        "questions": [
            {"question": "What is the cat called?", "answer": "Miso"},
            {"question": "Where was the cat born?", "answer": "Kyoto"},
        ],
    }
]


def test_a_benchmark_loader_and_its_judge(registries, tmp_path):
    from mnemoflow.data.registry import load_benchmark, n_steps
    from mnemoflow.data.tables import QUESTIONS, RUN_KEYS, SESSIONS, to_arrow
    from mnemoflow.data.validate import DataError
    from mnemoflow.eval.benchmark_metric import metric_for
    from mnemoflow.eval.static_qa.judges import judge_answers

    (loader_code,) = blocks("a benchmark loader")
    load_example(loader_code, "mybench")
    source = tmp_path / "mybench.json"
    source.write_text(json.dumps(RECORDS))
    spec = {"loader": "mybench", "source": {"path": str(source)}}
    prepared = load_benchmark(spec)
    assert to_arrow(prepared.sessions, SESSIONS).num_rows == 2
    assert to_arrow(prepared.questions, QUESTIONS).num_rows == 2
    assert list(prepared.episode_sessions.session_id) == ["e1/s0"]
    assert n_steps(spec) == 1 and metric_for(spec).judge == "generic"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**RECORDS[0], "questions": [{"question": "Q"}]}]))
    with pytest.raises(DataError, match=rf"{bad}: record 0 question 0: missing field 'answer'"):
        load_benchmark({"loader": "mybench", "source": {"path": str(bad)}})

    judge_code, handler_code = blocks("a judge")
    load_example(judge_code, "mybench_judge")
    load_example(handler_code, "mybench_judge_handler")
    assert metric_for(spec).judge == "mybench"
    keys = {name: "x" for name, _ in RUN_KEYS}
    answers = pd.DataFrame(
        [
            {**keys, "question_id": "e1/q0", "response": "The cat is called Miso."},
            {**keys, "question_id": "e1/q1", "response": "I do not know."},
        ]
    )
    judged = run(judge_answers(gateway(), "mybench", prepared.questions, answers))
    assert list(judged.value) == [1.0, 0.0]
    assert set(judged.judge) == {"offline-heuristic/mybench-v1"} and judged.parse_ok.all()


def test_a_memorybench_family_under_both_scorings_and_as_a_user(registries):
    from mnemoflow.data.validate import DataError
    from mnemoflow.eval.memorybench import memorybench_judge_protocol as jp
    from mnemoflow.eval.memorybench import memorybench_metrics as mm

    (code,) = blocks("a MemoryBench metric family")
    example = load_example(code, "exactqa")
    assert mm.FAMILIES.get("ExactQA") is example["ExactQA"]
    question = {
        "dataset": "ExactQA-1",
        "question_id": "ExactQA-1:0",
        "question": "What is six times seven?",
        "meta": json.dumps({"info": {"golden_answer": "42"}}),
    }
    llm = gateway()
    assert [run(mm.evaluate_item(question, r, llm)).value for r in ("42", "41")] == [1.0, 0.0]
    judged = [run(jp.evaluate_item(question, r, llm)) for r in ("It is 42.", "It is 41.")]
    assert [s.value for s in judged] == [1.0, 0.0] and all(s.parse_ok for s in judged)
    user = jp.simulated_user("ExactQA-1")
    assert user.persona == example["ExactQA"].user_persona
    assert user.context({}, "42") == "Reference Answer: 42"
    bare = {**question, "meta": json.dumps({"info": {}})}
    with pytest.raises(DataError, match=r"record ExactQA-1:0: missing field 'info.golden_answer'"):
        run(mm.evaluate_item(bare, "42", llm))
