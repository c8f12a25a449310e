"""Fingerprints of the package code a workflow stage runs, so that a code change re-runs its jobs.

Snakemake sees only the one-line scripts in ``scripts/``; the logic is in this package. Every rule
therefore carries ``code=code_version("<stage>")`` in its params, and Snakemake's ``params``
rerun trigger re-runs the job when the fingerprint changes. The offline backend keys its cached
replies with the same fingerprint of its handlers, so a changed heuristic is a cache miss.

What a stage depends on is derived from the source, never listed by hand: starting from the
entry (``mnemoflow.jobs.<group>:<stage>``), the walk follows every name the code uses to the
top-level definition it is bound to (a function, class or constant, in this module or imported from
another package module), the imports written inside functions, and string constants that name a
package module (``importlib.import_module("mnemoflow.memory.systems")``, ``"module:Class"``).
A module imported as a whole, or named in a string, counts in full with all its imports: that is
how registries (memory systems, loaders, offline handlers) pull in every module they register.
Statements at a module's top level that are neither definitions nor imports (registrations,
checks) count as soon as anything of that module does; a package's ``__init__`` counts, besides
those, the submodules it imports (they run whenever anything inside the package is imported).
So a metric module changes ``score``'s fingerprint but not ``answer``'s, although
``jobs/static_qa.py`` and ``protocols/static_qa.py`` hold both.

The fingerprint hashes the syntax tree, not the text: comments, docstrings and formatting do not
re-run anything (``ruff format`` over the package is free), any change to code does. Third-party
packages are not fingerprinted (the pinned environment covers them), nor are non-Python files.
Over-approximation is the safe side: a name a function merely mentions (in an annotation, say)
counts as a dependency.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = "mnemoflow"
ROOT = Path(__file__).resolve().parent
#: A bare stage name (no module) is a name bound in this package's top (``mnemoflow/jobs``).
JOBS = f"{PACKAGE}.jobs"

Item = tuple[str, str | None]  # (module, top-level name) or (module, None) for the whole module


def module_file(name: str) -> Path | None:
    """The source file of a package module (``None`` if ``name`` is not one)."""
    parts = name.split(".")
    if parts[0] != PACKAGE or "" in parts:
        return None
    base = ROOT.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def is_module(name: str) -> bool:
    return module_file(name) is not None


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


@cache
def _tree(name: str) -> ast.Module:
    path = module_file(name)
    assert path is not None, name
    return _strip_docstrings(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module name an ``ImportFrom`` reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = module if module_file(module).name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


Binding = tuple[str, str, str | None]  # ("def", module, name) | ("import", module, attr or None)


@cache
def _bindings(module: str) -> dict[str, Binding]:
    """Top-level names of a module: its own definitions and what its imports bind."""
    names: dict[str, Binding] = {}
    for stmt in _tree(module).body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[stmt.name] = ("def", module, stmt.name)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        names[node.id] = ("def", module, node.id)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    names[alias.asname] = ("import", alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    names[top] = ("import", top, None)
        elif isinstance(stmt, ast.ImportFrom):
            source = _absolute(module, stmt)
            for alias in stmt.names:
                names[alias.asname or alias.name] = ("import", source, alias.name)
    return names


def _definitions(module: str, name: str) -> list[ast.stmt]:
    """The top-level statements that define ``name`` (a function, class or assignment)."""
    found = []
    for stmt in _tree(module).body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if stmt.name == name:
                found.append(stmt)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                found.append(stmt)
    return found


def _side_effects(module: str) -> list[ast.stmt]:
    """Top-level statements that run on import and are neither definitions nor imports."""
    skip = (
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Import,
        ast.ImportFrom,
    )
    return [stmt for stmt in _tree(module).body if not isinstance(stmt, skip)]


def _target(source: str, attr: str | None) -> Item | None:
    """What ``from source import attr`` (or ``import source``) makes a name depend on."""
    if attr is not None and is_module(f"{source}.{attr}"):
        return (f"{source}.{attr}", None)
    if not is_module(source):
        return None  # third-party or standard library
    return (source, attr)


def _string_modules(node: ast.AST) -> list[Item]:
    """Package modules named in string constants (dynamic imports, ``module:Class`` paths); a
    constant ending in a dot (``f"mnemoflow.eval.{name}"``) may name any module of that package,
    so it names them all."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            name = sub.value.partition(":")[0]
            if name.startswith(f"{PACKAGE}.") and is_module(name):
                found.append((name, None))
            elif name.startswith(f"{PACKAGE}.") and name.endswith("."):
                found.extend((module, None) for module in _package_modules(name[:-1]))
    return found


def _package_modules(package: str) -> list[str]:
    """Every module under a package (none if ``package`` is not one)."""
    path = module_file(package)
    if path is None or path.name != "__init__.py":
        return []
    return [
        ".".join((PACKAGE, *file.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
        for file in sorted(path.parent.rglob("*.py"))
    ]


def _references(module: str, node: ast.AST) -> list[Item]:
    """Everything the code in ``node`` (part of ``module``) depends on, one step deep."""
    names = _bindings(module)
    found: list[Item] = _string_modules(node)
    consumed: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            found.extend(t for a in sub.names if (t := _target(a.name, None)))
        elif isinstance(sub, ast.ImportFrom):
            source = _absolute(module, sub)
            found.extend(t for a in sub.names if (t := _target(source, a.name)))
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            binding = names.get(sub.value.id)
            if binding and binding[0] == "import":
                imported = _target(binding[1], binding[2])
                if imported and imported[1] is None:  # module.attr: the attribute only
                    consumed.add(id(sub.value))
                    found.append(_target(imported[0], sub.attr) or imported)
        elif isinstance(sub, ast.Name) and id(sub) not in consumed:
            binding = names.get(sub.id)
            if binding is None:
                continue  # a builtin or a local name
            kind, source, attr = binding
            if kind == "def":
                found.append((module, attr))
            elif item := _target(source, attr):
                found.append(item)
    return found


@cache
def _node(item: Item) -> tuple[str | None, str, tuple[Item, ...]]:
    """(key, hash of its syntax tree, what it depends on) of one item; key ``None``: nothing
    of its own (a re-export, which only points on)."""
    module, name = item
    parent = module.rpartition(".")[0]
    package = ((parent, "<package>"),) if parent and is_module(parent) else ()
    if name is None:  # a whole module; importing it runs its package first
        tree = _tree(module)
        return module, _digest([tree]), tuple(_references(module, tree)) + package
    if name == "<package>":  # a package imported on the way (and its own package before it)
        statements = _side_effects(module)
        # Its own submodules that it imports run too (a registry filled on import); names it
        # imports from elsewhere are not code this item runs, so they do not count.
        refs = [
            ref
            for stmt in _tree(module).body
            if isinstance(stmt, ast.Import | ast.ImportFrom)
            for ref in _references(module, stmt)
            if ref[1] is None and ref[0].startswith(f"{module}.")
        ]
        refs += [ref for stmt in statements for ref in _references(module, stmt)]
        return f"{module}:{name}", _digest(statements), tuple(refs) + package
    statements = _definitions(module, name)
    if not statements:  # a name bound by an import (a re-export)
        binding = _bindings(module).get(name)
        if binding is None:
            raise ValueError(f"{module} defines no {name!r}")
        target = _target(binding[1], binding[2])
        return None, "", (target,) if target else ()
    statements = statements + _side_effects(module)
    refs = [ref for stmt in statements for ref in _references(module, stmt)]
    return f"{module}:{name}", _digest(statements), tuple(refs) + package


def _digest(nodes: list[ast.AST]) -> str:
    return hashlib.sha256("\n".join(ast.dump(n) for n in nodes).encode()).hexdigest()


def dependencies(*entries: str) -> dict[str, str]:
    """``{"module" or "module:name": hash of its syntax tree}`` of everything the entries reach.

    An entry is a stage (a function of ``mnemoflow.jobs``), ``module:name`` or a module name.
    """
    todo: list[Item] = [_entry(entry) for entry in entries]
    seen: set[Item] = set()
    found: dict[str, str] = {}
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        key, digest, refs = _node(item)
        if key is not None:
            found[key] = digest
        todo.extend(refs)
    return dict(sorted(found.items()))


def _entry(entry: str) -> Item:
    if ":" in entry:
        module, _, name = entry.partition(":")
    elif "." in entry:
        module, name = entry, None
    else:
        module, name = JOBS, entry
    if not is_module(module):
        raise ValueError(f"code_version: {module!r} is not a {PACKAGE} module")
    if name is not None and name not in _bindings(module):
        raise ValueError(f"code_version: {module} has no {name!r}")
    return (module, name)


@cache
def code_version(*entries: str) -> str:
    """A short hash of the code the entries run: equal exactly when that code is unchanged."""
    digest = hashlib.sha256()
    for key, source in dependencies(*entries).items():
        digest.update(f"{key}\0{source}\0".encode())
    return digest.hexdigest()[:16]
