"""The MemorySystem interface and the registry that finds systems by name.

A memory system holds what one episode's assistant remembers. Protocols build one instance per
episode, ``add`` that episode's messages step by step, ``save`` a snapshot folder per step, and
``retrieve`` items for each question. Every item names the unified turn ids it came from
(``source_ids``) so that retrieval recall and the write / read / utilization diagnosis can be
computed from tables alone.

Methods that may call a model (``add`` for agentic writers, ``retrieve`` for query rewriting) are
``async`` so that a protocol can run many episodes concurrently against a real endpoint.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import jsonschema

from mnemoflow.errors import ConfigError
from mnemoflow.registry import Registry

#: JSON Schema 2020-12, except that an integer parameter rejects 5.0 (the standard accepts it),
#: since the systems slice and count with these values.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


@dataclass(frozen=True)
class Message:
    """One turn of a conversation, with the unified ids it carries into memory."""

    turn_id: str
    session_id: str
    role: str
    content: str
    speaker: str = ""
    time: str = ""  # the conversation's own timestamp (never wall clock)


@dataclass
class MemoryItem:
    """One retrieved memory: text shown to the reader, and where it came from."""

    id: str
    text: str
    score: float
    source_ids: list[str] = field(default_factory=list)
    time: str = ""


@dataclass(frozen=True)
class WritePattern:
    """How a system writes, as ``mnemoflow plan`` counts it before a run (the writer's replies
    decide the rest): the system states it, the planner asks it.

    - ``batch_param``: the parameter holding the messages per written batch (``None``: one
      message per batch);
    - ``buffered``: batches leave the (update_batch, local_window) buffer only once it holds
      ``update_batch + local_window`` messages (:mod:`mnemoflow.memory.buffer`), so the newest
      ``local_window`` messages are never written;
    - ``writer_tasks``: the ``memory_writer`` calls of each written batch, by task (none: it
      asks no writer);
    - ``unit``: what one embedded text is: ``message``, ``session`` or ``fact`` (what a writer
      call extracts); ``facts_per_batch`` facts per written batch;
    - ``calls_per_batch``: expected calls of each of ``writer_tasks`` per written batch, in that
      order (empty: one each; below 1 where a call is made only when an earlier one found
      something, above 1 where it is made per fact or entity found);
    - ``prompt_tokens``: a product's own prompt per task, where the planner cannot render it,
      as (fixed tokens, times the batch's text it holds), counted the offline model's way
      (words) on its offline twin's run (empty: rendered with :mod:`mnemoflow.memory.writer`);
    - ``query_tasks``: the writer's calls per retrieval, by task (a search that asks the model,
      as Mem0-G asks for the query's entities), each prompt ``query_prompt_tokens`` fixed words
      and the query; ``texts_per_query``: embedded texts per retrieval (the query, and what the
      search embeds besides).
    """

    batch_param: str | None = "update_batch"
    buffered: bool = False
    writer_tasks: tuple[str, ...] = ()
    unit: str = "message"
    facts_per_batch: float = 1.0
    calls_per_batch: tuple[float, ...] = ()
    prompt_tokens: tuple[tuple[float, float], ...] = ()
    query_tasks: tuple[str, ...] = ()
    query_prompt_tokens: tuple[float, ...] = ()
    texts_per_query: float = 1.0

    @classmethod
    def per_task(
        cls, tasks: Mapping[str, tuple[float, tuple[float, float]]], **rest: Any
    ) -> WritePattern:
        """A product's pattern, each writer task with its (calls per batch, (fixed tokens,
        times the batch)) beside its name, in calling order."""
        rates = tuple(rate for rate, _ in tasks.values())
        prompts = tuple(prompt for _, prompt in tasks.values())
        return cls(writer_tasks=tuple(tasks), calls_per_batch=rates, prompt_tokens=prompts, **rest)

    def rate(self, index: int) -> float:
        """Expected calls of ``writer_tasks[index]`` per written batch."""
        return self.calls_per_batch[index] if self.calls_per_batch else 1.0


class MemorySystem(ABC):
    """Base class: subclasses set ``name``, ``defaults`` and ``params_schema`` (the built-in
    ones from one :func:`~mnemoflow.memory.params.declare_params` table) and implement the
    abstract methods.

    ``params`` are the system's config values merged over ``defaults``; unknown keys and values
    outside ``params_schema`` are an error so that a typo in config.yaml does not silently run the
    default, and a bad value fails at workflow start rather than deep inside a job.
    """

    name: ClassVar[str] = ""
    #: What a product imports from outside the project, ``(module, distribution, version)``, and
    #: the command that installs it: checked when the workflow starts, without importing it.
    requires: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    install: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    #: JSON Schema of each parameter, keyed like ``defaults`` (a parameter without one: unchecked).
    params_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Parameters that shape what ``add`` stores; the others only shape ``retrieve``, so changing
    #: them re-runs answering but not ingestion. ``None`` (the safe default): every parameter.
    ingest_params: ClassVar[frozenset[str] | None] = None
    #: Model roles ``add`` and ``retrieve`` call through ``self.llm``: a change to another role's
    #: binding re-runs neither stage. Default: the writer and the embedder, at both stages.
    ingest_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    query_roles: ClassVar[tuple[str, ...]] = ("memory_writer", "embedder")
    #: How it writes and what it embeds, for the planner (default: one writer call per
    #: ``update_batch`` messages, one embedded text per message).
    write_pattern: ClassVar[WritePattern] = WritePattern(writer_tasks=("write",))
    #: What one retrieved item is, ``message`` or ``session``: the planner's model-free stand-in
    #: for a system that calls a model retrieves at the same granularity.
    granularity: ClassVar[str] = "message"

    def __init__(self, params: dict[str, Any] | None = None, llm: Any = None, seed: int = 0):
        params = dict(params or {})
        self.check_params(params, f"systems.{self.name}")
        self.params: dict[str, Any] = {**self.defaults, **params}
        self.llm = llm  # a Gateway, for systems that write or embed with a model
        self.seed = seed

    @classmethod
    def write_pattern_for(cls, params: dict[str, Any]) -> WritePattern:
        """How the system configured with ``params`` writes (:class:`WritePattern`)."""
        return cls.write_pattern

    @classmethod
    def check_params(cls, params: dict[str, Any], where: str) -> None:
        """Raise a one-line ConfigError naming ``<where>.<param>`` for an unknown or bad value."""
        unknown = sorted(set(params) - set(cls.defaults))
        if unknown:
            raise ConfigError(
                f"{where}: unknown parameters {unknown}; known: {sorted(cls.defaults)}"
            )
        for key, value in params.items():
            schema = cls.params_schema.get(key)
            if schema is None:
                continue
            error = jsonschema.exceptions.best_match(_Validator(schema).iter_errors(value))
            if error is not None:
                raise ConfigError(f"{where}.{key}: {error.message}")

    @abstractmethod
    async def add(self, messages: list[Message], meta: dict[str, Any] | None = None) -> None:
        """Store a batch of messages (one or more sessions, in order)."""

    @abstractmethod
    async def retrieve(self, query: str, k: int | None = None) -> list[MemoryItem]:
        """Return up to ``k`` items (default: the system's ``top_k``) best for ``query``."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write everything needed to resume into ``directory`` (which exists)."""

    @abstractmethod
    def load(self, directory: Path) -> None:
        """Restore the state written by :meth:`save`."""

    def stats(self) -> dict[str, Any]:
        """Counters for reports: items stored, tokens written, writer calls."""
        return {}

    def stored_ids(self) -> set[str] | None:
        """Unified turn ids whose content the memory holds (for write-failure diagnosis).

        ``None`` means the system cannot say; such runs report no write / read split.
        """
        return None

    def describe(self) -> str:
        """One line on what the system stores, for reports."""
        return (self.__doc__ or self.name).strip().splitlines()[0]


#: Systems by ``name``: the built-in ones, installed packages' (entry-point group
#: ``mnemoflow.memory``) and, in config, any ``package.module:Class`` path.
SYSTEMS = Registry(
    "memory system",
    builtin_modules=["mnemoflow.memory.systems"],
    entry_points="mnemoflow.memory",
    base=MemorySystem,
)


def register(cls: type[MemorySystem]) -> type[MemorySystem]:
    """Class decorator: make a system available by its ``name`` in config."""
    if not cls.name:
        raise TypeError(f"{cls.__qualname__} has no name")
    return SYSTEMS.register(cls.name)(cls)


def available() -> list[str]:
    return SYSTEMS.names()


def resolve(type_name: str) -> type[MemorySystem]:
    """Find a system class by registered name or by a ``package.module:Class`` path."""
    return SYSTEMS.get(type_name)


#: Keys of a ``systems:`` entry that label the system for comparisons (``published_as``: the
#: name a paper prints for it, docs/reproduce.md); no stage reads them, so they are neither
#: parameters nor job params.
LABEL_KEYS = ("published_as",)


def without_labels(spec: dict[str, Any]) -> dict[str, Any]:
    """A ``systems:`` entry without its :data:`LABEL_KEYS` (what the jobs are given)."""
    return {key: value for key, value in spec.items() if key not in LABEL_KEYS}


def _split_spec(spec: dict[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    params = without_labels(spec)
    type_name = params.pop("type", None) or params.pop("class", None)
    if not type_name:
        raise ConfigError(f"{where}: needs 'type' (or 'class'), got {spec}")
    return type_name, params


def build(
    spec: dict[str, Any], llm: Any = None, seed: int = 0, name: str | None = None
) -> MemorySystem:
    """Build a system from its config entry ``{type: NAME or module:Class, **params}``.

    ``name`` is the entry's key under ``systems:`` in config.yaml, used in error messages.
    """
    where = f"systems.{name or spec.get('type') or spec.get('class')}"
    type_name, params = _split_spec(spec, where)
    cls = resolve(type_name)
    cls.check_params(params, where)
    return cls(params, llm=llm, seed=seed)


#: The stages of a memory's life: ``ingest`` builds snapshots (``add``), ``query`` reads them.
STAGES = ("ingest", "query")


def stage_spec(spec: dict[str, Any], stage: str) -> dict[str, Any]:
    """The part of a ``systems:`` entry that ``stage`` uses: its type and that stage's parameters.

    A job's params carry only this part, so a query-time parameter (``top_k``) does not re-run
    ingestion. The answer job gets the ingest-time part back from the snapshot it reads
    (:func:`full_spec`), which a change to it rebuilds.
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    kind = "type" if spec.get("type") else "class"
    type_name, params = _split_spec(spec, "systems")
    declared = resolve(type_name).ingest_params
    at_ingest = set(params) if declared is None else set(declared)
    keep = at_ingest if stage == "ingest" else set(params) - at_ingest
    return {kind: type_name, **{k: v for k, v in params.items() if k in keep}}


def full_spec(ingest_part: dict[str, Any], query_part: dict[str, Any]) -> dict[str, Any]:
    """A system's whole entry from its two stage parts (the query part wins, it is newer)."""
    return {**ingest_part, **query_part}


def stage_roles(spec: dict[str, Any], stage: str) -> tuple[str, ...]:
    """The model roles a system calls at ``stage`` (its ``ingest_roles`` or ``query_roles``)."""
    type_name, _ = _split_spec(spec, "systems")
    cls = resolve(type_name)
    return tuple(cls.ingest_roles if stage == "ingest" else cls.query_roles)


def check_systems(systems: dict[str, dict[str, Any]]) -> None:
    """Validate every ``systems:`` entry of a config (the workflow calls this at startup)."""
    for name, spec in systems.items():
        where = f"systems.{name}"
        type_name, params = _split_spec(spec, where)
        try:
            system = resolve(type_name)
        except ConfigError as exc:
            raise ConfigError(f"config {where}.type: {exc}") from None
        system.check_params(params, where)


def check_installed(systems: dict[str, dict[str, Any]], names: Iterable[str]) -> None:
    """The startup check of the systems the run uses (``names``): every package a product
    imports is installed at its pinned version, else one line naming the install command."""
    from mnemoflow.memory.products import INSTALL_HINT, not_installed

    for name in sorted(set(names)):
        where = f"systems.{name}"
        type_name, _ = _split_spec(systems[name], where)
        system = resolve(type_name)
        for requirement in system.requires:
            problem = not_installed(*requirement)
            if problem:
                raise ConfigError(
                    f"config {where}: {system.name} {problem}; run: "
                    f"{system.install or INSTALL_HINT}"
                )


def save_messages(path: Path, messages: list[Message]) -> None:
    """JSON Lines helper shared by systems that keep the raw messages."""
    with open(path, "w", encoding="utf-8") as handle:
        for message in messages:
            handle.write(json.dumps(asdict(message), ensure_ascii=False) + "\n")


def load_messages(path: Path) -> list[Message]:
    with open(path, encoding="utf-8") as handle:
        return [Message(**json.loads(line)) for line in handle if line.strip()]
