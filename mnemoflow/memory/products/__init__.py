"""Real memory products behind the ``MemorySystem`` interface, each an optional extra.

A product's package is imported only when a system is built (never when the registry lists the
systems or the workflow checks a config), so the project runs without any product installed and
a missing one fails in one line naming the ``pip install`` to run. Every model call a product
makes goes through the gateway: its LLM and embedder objects are replaced in-process by bridges.
Each adapter is one class on ``base.py`` (install check, snapshot tar, bridge thread, counters),
naming its offline twin in ``mnemoflow/llm/offline/``.

Products adapted so far, all in extra ``products``: ``mem0_paper`` and ``mem0_graph`` (mem0ai
1.0.11), ``graphiti`` (graphiti-core 0.31.2 on Kuzu), ``langmem`` (langmem 0.0.30); and
``memoryos`` (memoryos-pro 0.1.0, installed ``--no-deps`` by ``make install-products``);
``a_mem`` (a-mem 0.2.6) in extra ``products-amem`` of its own, for its weight (``make
install-amem``). Not yet: letta, mem0 2.x (docs/memory.md says why).
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib import metadata
from types import ModuleType
from typing import Any

from mnemoflow.errors import ConfigError

#: What installs every product that shares the project's environment.
INSTALL_HINT = "pip install -e '.[products]' (or: make install-products)"


def not_installed(module: str, distribution: str, version: str) -> str | None:
    """What is wrong with one requirement of a product, found without importing it (the
    workflow's startup check, ``memory.base.check_installed``); None when it is installed."""
    if importlib.util.find_spec(module) is None:
        return f"needs {distribution}=={version} (module {module!r} is not installed)"
    return _version_problem(distribution, version)


def _version_problem(distribution: str, version: str) -> str | None:
    try:
        found = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        found = None
    return None if found == version else f"needs {distribution}=={version}, found {found}"


def require_all(system: Any) -> None:
    """Import every requirement ``system`` declares (its ``requires`` and ``install``)."""
    for module, distribution, version in system.requires:
        require(system.name, module, distribution, version, system.install or INSTALL_HINT)


def require(
    system: str, module: str, distribution: str, version: str, install: str = INSTALL_HINT
) -> ModuleType:
    """Import ``module`` of the product a system adapts, checking its pinned version; a missing
    or different installation is a one-line ConfigError naming the install command."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or module
        raise ConfigError(
            f"systems type {system}: needs {distribution}=={version} (module {missing!r} is not "
            f"installed); run: {install}"
        ) from None
    problem = _version_problem(distribution, version)
    if problem:
        raise ConfigError(f"systems type {system}: {problem}; run: {install}")
    return loaded
