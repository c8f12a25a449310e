"""The package's import rules (docs: design "Who may import whom"), checked on the source.

A layer that imports a higher one couples what should stay swappable: a memory system that knew
protocols, a loader that knew the model client. The check reads every module's imports with
``ast``, including imports inside functions.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mnemoflow"

#: Sub-package -> the mnemoflow sub-packages and modules it may import (itself always allowed).
#: ``errors``, ``lexical`` (text normalization, token counts), ``intervals``, ``grouping`` (random
#: groups of names), ``codeversion`` (source fingerprints), ``registry`` (things found by name),
#: ``prices`` (model prices and context windows), ``amemgym_world`` (the topic world the offline
#: AMemGym writer and assistant share), ``repeats`` (the seeds, folders and seeded role bindings
#: of ``repeats: N``; the planner plans each repeat with them) and ``layout`` (the results layout
#: and the run's grid) serve every layer.
SHARED = {
    "errors",
    "lexical",
    "intervals",
    "grouping",
    "codeversion",
    "registry",
    "prices",
    "amemgym_world",
    "repeats",
    "layout",
}
ALLOWED = {
    "llm": SHARED,
    "data": SHARED,
    "memory": SHARED | {"llm"},
    "eval": SHARED | {"llm", "data"},
    "agents": SHARED | {"llm", "data", "memory"},
    "simulators": SHARED | {"llm", "data"},
    "report": SHARED | {"data"},
    "environment": SHARED | {"llm", "data"},
    "protocols": SHARED | {"llm", "data", "memory", "agents", "simulators", "eval"},
    # processes the CLI starts and stops: standard library, the results layout and itself only
    "ops": {"layout"},
    # `mnemoflow plan` and budget_usd: walks the protocols' data with their request builders
    "planning": SHARED
    | {"llm", "data", "memory", "agents", "simulators", "eval", "protocols", "environment"},
}


@pytest.fixture(autouse=True)
def _collected_garbage():
    """Finalize garbage left by earlier tests first: an unclosed HTTP session collected while
    ``ast.parse`` builds its tree logs from its finalizer, and CPython 3.11 then fails the parse
    ("AST constructor recursion depth mismatch"), which is no fault of the parsed file."""
    gc.collect()


def imported_layers(path: Path) -> set[str]:
    """The mnemoflow sub-packages / top-level modules that ``path`` imports."""
    layers = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "mnemoflow" and len(parts) > 1:
                layers.add(parts[1])
    return layers


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files, f"mnemoflow/{layer} has no modules"
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(imported_layers(path) - ALLOWED[layer] - {layer})
        for path in files
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_nothing_in_the_package_imports_the_workflow_scripts():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "from scripts" not in text and "import scripts" not in text, path


#: The top: the glue the workflow's scripts call (``jobs``), the ``mnemoflow`` command and its
#: sub-commands. They may import the library; nothing in the library imports them.
TOP = {"jobs", "commands", "cli"}


def _layer(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def test_nothing_in_the_library_imports_the_jobs_the_commands_or_the_cli():
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(imported_layers(path) & TOP)
        for path in PACKAGE.rglob("*.py")
        if _layer(path) not in TOP
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_the_jobs_import_the_library_but_not_the_commands_or_the_cli():
    for path in (PACKAGE / "jobs").rglob("*.py"):
        assert not imported_layers(path) & {"commands", "cli"}, path


# ---- inside eval: the families (static QA, MemoryBench, AMemGym) and the metrics they share ----

#: eval's sub-packages -> the eval sub-packages / modules each may import (itself always allowed).
#: ``metrics`` serves every family; a family never imports another family; the static QA judges
#: register in ``benchmark_metric``'s judge registry. The modules in ``eval/`` itself
#: (``SPANNING``) span the families and may import any.
SPANNING = {"benchmark_metric", "export", "imported", "imported_amemgym", "metric_registry"}
EVAL_FAMILIES = {
    "metrics": set(),
    "static_qa": {"metrics", "benchmark_metric"},
    "memorybench": {"metrics"},
    "amemgym": {"metrics"},
}


def imported_eval_parts(path: Path) -> set[str]:
    """The ``mnemoflow.eval`` sub-packages / modules that ``path`` imports (``from
    mnemoflow.eval import x`` names ``x``)."""
    nodes = list(ast.walk(ast.parse(path.read_text(), filename=str(path))))
    named = [a.name for n in nodes if isinstance(n, ast.Import) for a in n.names]
    named += [
        f"{n.module}.{a.name}" if n.module == "mnemoflow.eval" else n.module
        for n in nodes
        if isinstance(n, ast.ImportFrom) and n.module and not n.level
        for a in n.names
    ]
    return {name.split(".")[2] for name in named if name.startswith("mnemoflow.eval.")}


@pytest.mark.parametrize("family", sorted(EVAL_FAMILIES))
def test_an_eval_family_imports_only_the_shared_metrics(family):
    files = sorted((PACKAGE / "eval" / family).rglob("*.py"))
    assert files, f"mnemoflow/eval/{family} has no modules"
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(
            imported_eval_parts(path) - EVAL_FAMILIES[family] - {family}
        )
        for path in files
    }
    assert not {k: v for k, v in wrong.items() if v}


def test_eval_holds_only_the_families_and_what_spans_them():
    folders = {
        p.name for p in (PACKAGE / "eval").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    assert folders == set(EVAL_FAMILIES)
    flat = {p.stem for p in (PACKAGE / "eval").glob("*.py")} - {"__init__"}
    assert flat <= SPANNING, flat
