"""Code fingerprints per stage (mnemoflow.codeversion), on a small package written for the test
and on the real one.

The toy package has what makes the real one hard: one jobs module and one protocol module that
serve two stages, a registry filled by modules named in a string, an import inside a function.
"""

from __future__ import annotations

import textwrap

import pytest

from mnemoflow import codeversion

TOY = {
    "__init__.py": "",
    "jobs.py": """
        from mnemoflow.protocols import qa
        from mnemoflow.io import write

        def answer(path):
            write(path, qa.answer())

        def score(path):
            write(path, qa.score())
    """,
    "protocols/__init__.py": "",
    "protocols/qa.py": '''
        """Both stages' logic in one module."""
        from mnemoflow.memory import build
        from mnemoflow.metrics import accuracy

        def answer():
            return build("keyword").retrieve()

        def score():
            return accuracy([1, 0])
    ''',
    "io.py": """
        def write(path, value):
            open(path, "w").write(str(value))
    """,
    "metrics.py": """
        def accuracy(values):
            return sum(values) / len(values)
    """,
    "memory/__init__.py": """
        import importlib

        REGISTRY = {}

        def build(name):
            importlib.import_module("mnemoflow.memory.systems")
            return REGISTRY[name]()
    """,
    "memory/systems.py": """
        from mnemoflow.memory import REGISTRY

        class Keyword:
            def retrieve(self):
                from mnemoflow.ranking import rank
                return rank()

        REGISTRY["keyword"] = Keyword
    """,
    "ranking.py": """
        def rank():
            return [3, 1, 2]
    """,
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    root = tmp_path / "mnemoflow"
    for name, text in TOY.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.setattr(codeversion, "ROOT", root)
    clear = (codeversion._tree, codeversion._bindings, codeversion._node, codeversion.code_version)
    for fn in clear:
        fn.cache_clear()
    yield root
    for fn in clear:
        fn.cache_clear()


def fresh(entry: str) -> str:
    for fn in (codeversion._tree, codeversion._bindings, codeversion._node):
        fn.cache_clear()
    codeversion.code_version.cache_clear()
    return codeversion.code_version(entry)


def modules(entry: str) -> set[str]:
    return {key.partition(":")[0] for key in codeversion.dependencies(entry)}


def test_each_stage_reaches_only_the_code_it_runs(toy):
    assert modules("answer") == {
        "mnemoflow",
        "mnemoflow.jobs",
        "mnemoflow.io",
        "mnemoflow.protocols",
        "mnemoflow.protocols.qa",
        "mnemoflow.memory",
        "mnemoflow.memory.systems",  # named in a string: the registry's members
        "mnemoflow.ranking",  # imported inside a method of a registered class
    }
    assert modules("score") == {
        "mnemoflow",
        "mnemoflow.jobs",
        "mnemoflow.io",
        "mnemoflow.protocols",
        "mnemoflow.protocols.qa",
        "mnemoflow.metrics",
    }


def test_a_metric_change_moves_score_and_not_answer(toy):
    answer, score = fresh("answer"), fresh("score")
    metrics = toy / "metrics.py"
    metrics.write_text(metrics.read_text().replace("sum(values)", "sum(values) * 1.0"))
    assert fresh("answer") == answer
    assert fresh("score") != score


def test_a_change_deep_in_a_registered_system_moves_answer(toy):
    answer = fresh("answer")
    ranking = toy / "ranking.py"
    ranking.write_text(ranking.read_text().replace("[3, 1, 2]", "[3, 2, 1]"))
    assert fresh("answer") != answer


def test_a_registry_filled_by_a_package_init_counts_its_members(toy):
    """``plugins/__init__.py`` imports its submodules to register them; a stage that imports one
    of them by name runs that ``__init__``, so it looks up every registered member: a change to
    another member must move its fingerprint (it once counted only the ``__init__``'s
    non-import statements)."""
    files = {
        "plugins/__init__.py": "from mnemoflow.plugins import fast, slow  # registration\n",
        "plugins/registry.py": "PLUGINS = {}\n",
        "plugins/fast.py": (
            "from mnemoflow.plugins.registry import PLUGINS\n\n"
            "def fast():\n    return 1\n\nPLUGINS['fast'] = fast\n"
        ),
        "plugins/slow.py": (
            "from mnemoflow.plugins.registry import PLUGINS\n\n"
            "def slow():\n    return 2\n\nPLUGINS['slow'] = slow\n"
        ),
        "pick.py": (
            "from mnemoflow.plugins.registry import PLUGINS\n\n"
            "def pick(name):\n    return PLUGINS[name]()\n"
        ),
    }
    for name, text in files.items():
        (toy / name).parent.mkdir(parents=True, exist_ok=True)
        (toy / name).write_text(text)
    assert "mnemoflow.plugins.slow" in modules("mnemoflow.pick:pick")
    before = fresh("mnemoflow.pick:pick")
    slow = toy / "plugins/slow.py"
    slow.write_text(slow.read_text().replace("return 2", "return 3"))
    assert fresh("mnemoflow.pick:pick") != before


def test_a_module_named_by_a_formatted_string_counts_its_whole_package(toy):
    """``import_module(f"mnemoflow.metrics_pkg.{name}")`` may import any module of the package,
    so each of them counts (the constant prefix once counted as the package's ``__init__``
    alone)."""
    files = {
        "metrics_pkg/__init__.py": "",
        "metrics_pkg/f1.py": "def score():\n    return 1\n",
        "metrics_pkg/bleu.py": "def score():\n    return 2\n",
        "dispatch.py": (
            "import importlib\n\n"
            "def run(name):\n"
            "    return importlib.import_module(f'mnemoflow.metrics_pkg.{name}').score()\n"
        ),
    }
    for name, text in files.items():
        (toy / name).parent.mkdir(parents=True, exist_ok=True)
        (toy / name).write_text(text)
    assert {"mnemoflow.metrics_pkg.f1", "mnemoflow.metrics_pkg.bleu"} <= modules(
        "mnemoflow.dispatch:run"
    )
    before = fresh("mnemoflow.dispatch:run")
    bleu = toy / "metrics_pkg/bleu.py"
    bleu.write_text(bleu.read_text().replace("return 2", "return 3"))
    assert fresh("mnemoflow.dispatch:run") != before


def test_relative_imports_at_top_level_and_inside_a_function_count(toy):
    files = {
        "rel/__init__.py": "",
        "rel/a.py": (
            "from .b import helper\n\n"
            "def f():\n"
            "    from . import c\n"
            "    from ..ranking import rank\n"
            "    return helper() + c.g() + rank()[0]\n"
        ),
        "rel/b.py": "def helper():\n    return 1\n",
        "rel/c.py": "def g():\n    return 2\n",
    }
    for name, text in files.items():
        (toy / name).parent.mkdir(parents=True, exist_ok=True)
        (toy / name).write_text(text)
    assert {"mnemoflow.rel.b", "mnemoflow.rel.c", "mnemoflow.ranking"} <= modules(
        "mnemoflow.rel.a:f"
    )
    before = fresh("mnemoflow.rel.a:f")
    (toy / "rel/c.py").write_text("def g():\n    return 3\n")
    assert fresh("mnemoflow.rel.a:f") != before


def test_comments_docstrings_and_layout_change_nothing(toy):
    before = {stage: fresh(stage) for stage in ("answer", "score")}
    qa = toy / "protocols/qa.py"
    text = qa.read_text().replace('"""Both stages\' logic in one module."""', '"""Reworded."""')
    text = text.replace("return accuracy([1, 0])", "return accuracy(  [1, 0]  )  # a comment")
    qa.write_text(text)
    assert {stage: fresh(stage) for stage in ("answer", "score")} == before


def test_the_other_stages_function_in_a_shared_module_is_not_a_dependency(toy):
    score = fresh("score")
    qa = toy / "protocols/qa.py"
    qa.write_text(qa.read_text().replace('build("keyword")', 'build("keyword" + "")'))
    assert fresh("score") == score


def test_an_unknown_stage_is_an_error(toy):
    with pytest.raises(ValueError, match="mnemoflow.jobs has no 'judge'"):
        fresh("judge")


def test_the_real_stages():
    """On the package itself: scoring code is score's alone, the readers answer's alone."""
    score = modules("mnemoflow.jobs.static_qa:score")
    answer = modules("mnemoflow.jobs.static_qa:answer")
    assert (
        "mnemoflow.eval.static_qa.scoring" in score
        and "mnemoflow.eval.static_qa.scoring" not in answer
    )
    assert "mnemoflow.agents.readers" in answer and "mnemoflow.agents.readers" not in score
    ingest = modules("mnemoflow.jobs.static_qa:ingest")
    assert "mnemoflow.llm.offline.writer" in ingest  # through the offline backend
    assert len(codeversion.code_version("mnemoflow.jobs.static_qa:score")) == 16


def test_offline_identity_is_per_task():
    from mnemoflow.llm.offline import identity

    writer_deps = modules("mnemoflow.llm.offline.writer:extract_facts")
    judge_deps = modules("mnemoflow.llm.offline.judge:judge_qa")
    assert "mnemoflow.llm.offline.writer" in writer_deps
    assert "mnemoflow.llm.offline.writer" not in judge_deps  # a writer change keeps judge hits
    assert identity("memory_extract_facts").startswith("offline-heuristic@")
    assert identity("memory_extract_facts") != identity("judge_qa")


def test_an_offline_handler_registered_outside_the_package_is_identified_by_its_source(
    monkeypatch,
):
    from mnemoflow.llm.offline import HANDLERS, _load_handlers, identity

    _load_handlers()

    def first(fields):
        return "one"

    def second(fields):
        return "two"

    monkeypatch.setitem(HANDLERS, "plugin_task", first)
    one = identity("plugin_task")
    monkeypatch.setitem(HANDLERS, "plugin_task", second)
    assert one.startswith("offline-heuristic@") and identity("plugin_task") != one


def test_an_offline_handlers_data_files_are_part_of_its_identity(monkeypatch, tmp_path):
    """Editing the templates a handler answers from must miss its cached replies."""
    from mnemoflow.llm.offline import HANDLERS, READS, _load_handlers, identity

    _load_handlers()
    templates = tmp_path / "templates.yaml"
    templates.write_text("choices: [a, b]\n")
    monkeypatch.setitem(HANDLERS, "plugin_task", lambda fields: "one")
    monkeypatch.setitem(READS, "plugin_task", (templates,))
    before = identity("plugin_task")
    templates.write_text("choices: [a, c]\n")
    assert identity("plugin_task") != before
    assert READS["env-questions"] and READS["env-questions"][0].name == "amemgym_topics.yaml"
