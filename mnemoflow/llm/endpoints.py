"""Named endpoints (config ``endpoints:``) and the roles bound to them (``models.<role>.endpoint``).

An endpoint is named once and bound by any number of roles:

- **external**: ``{base_url, api_key_env, headers_env}`` (or ``base_url_env`` instead of
  ``base_url``), a server someone else runs. A role bound to it gets those keys when the config is
  read (:func:`bind_endpoints`), so the rest of the pipeline sees an ordinary binding; a secret
  is only ever named by its environment variable (:mod:`mnemoflow.llm.addresses`).
- **managed**: ``{serve: "COMMAND ... --port {port}", gpus, ready_timeout_s, ...}``, a model server
  the workflow starts itself (``mnemoflow.ops.endpoints``), and/or ``run_batch: "COMMAND ...
  {input} ... {output}"``, which drains a Batch-API-mode role's batch file (on SLURM as a job of
  its own with the endpoint's resources, :mod:`mnemoflow.jobs.run_batch`). A server's address is
  only known once it runs, so a bound role carries the symbolic ``base_url`` ``endpoint://NAME``
  (in the rule's params, the ledger and the endpoint-limit resource name); the job resolves it to
  the running server's address when it starts (:class:`Address`). The response cache never keys
  on ``base_url``, so a new port keeps the cache; prices are keyed by the role's ``model``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mnemoflow.errors import ConfigError, reject_unknown
from mnemoflow.llm.addresses import (
    check_headers_env,
    check_variable,
    redact,
    refuse_credentials,
)
from mnemoflow.llm.urls import check_base_url

#: ``base_url`` of a role bound to a managed endpoint, until its job resolves the address.
MANAGED_SCHEME = "endpoint://"

EXTERNAL_KEYS = {"base_url", "api_key_env", "headers_env", "base_url_env", "run_batch"}
#: Keys that say where an external endpoint is or how it is called: the endpoint's, not a role's.
ADDRESS_KEYS = ("base_url", "base_url_env", "api_key_env", "headers_env")
#: Keys of an offline endpoint: only ``backend: offline``.
OFFLINE_KEYS = {"backend"}
#: Role keys only a server reads, dropped when the role is bound to an offline endpoint.
SERVER_ONLY_KEYS = (
    "model",
    "extra_body",
    "context_window",
    "endpoint",
    "structured_output",
    "api_key_env",
)
#: Keys of a managed endpoint (docs/slurm.md, "Managed endpoints").
MANAGED_KEYS = {
    "serve",  # the command; ``{port}`` is replaced by a free port of the node it runs on
    "gpus",  # GPUs of its SLURM job (--gres=gpu:N); 0: none
    "cpus",  # CPUs of its SLURM job
    "mem_mb",  # memory of its SLURM job
    "ready_timeout_s",  # from its start until GET /v1/models answers
    "time_limit_min",  # it is stopped after this, whatever runs (SLURM --time)
    "idle_timeout_s",  # stopped when no job has used it for this long
    "slurm_partition",
    "slurm_account",
    "run_batch",  # drains a Batch-API-mode role's batch file: a command with {input}, {output}
}
MANAGED_DEFAULTS = {
    "gpus": 0,
    "cpus": 1,
    "mem_mb": 4000,
    "ready_timeout_s": 600,
    "time_limit_min": 720,
    "idle_timeout_s": 300,
    "slurm_partition": None,
    "slurm_account": None,
}


def managed_url(name: str) -> str:
    return f"{MANAGED_SCHEME}{name}"


def managed_name(base_url: str | None) -> str | None:
    """The endpoint a symbolic ``endpoint://NAME`` address names (None for a real address)."""
    if base_url and base_url.startswith(MANAGED_SCHEME):
        return base_url[len(MANAGED_SCHEME) :]
    return None


def check_endpoints(endpoints: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every endpoint, checked, with a managed one's defaults filled in; one-line errors naming
    ``endpoints.NAME.KEY``."""
    checked: dict[str, dict[str, Any]] = {}
    for name, spec in (endpoints or {}).items():
        where = f"config endpoints.{name}"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}: a mapping, got {type(spec).__name__}")
        if "serve" in spec and "base_url" in spec:
            raise ConfigError(
                f"{where}: both serve and base_url; a managed endpoint (serve) gets its address "
                "when it runs, an external one (base_url) is run by someone else"
            )
        if "backend" in spec:
            reject_unknown(spec, OFFLINE_KEYS, where, list_known=True)
            if spec["backend"] != "offline":
                raise ConfigError(
                    f"{where}.backend: only offline (the embedded heuristic model) is named "
                    f"here, got {spec['backend']!r}; a server gives base_url or serve"
                )
            checked[name] = dict(spec)
        elif is_managed(spec):
            reject_unknown(spec, MANAGED_KEYS, where, list_known=True)
            command = spec.get("serve", "{port}")
            if not isinstance(command, str) or "{port}" not in command:
                raise ConfigError(
                    f"{where}.serve: a command with {{port}} where the server's port goes, "
                    f"got {command!r}"
                )
            command = spec.get("run_batch", "{input} {output}")
            if (
                not isinstance(command, str)
                or "{input}" not in command
                or "{output}" not in command
            ):
                raise ConfigError(
                    f"{where}.run_batch: a command with {{input}} and {{output}} where the "
                    f"batch file and its output go, got {command!r}"
                )
            merged = {**MANAGED_DEFAULTS, **spec}
            for key in ("gpus", "cpus", "mem_mb"):
                value = merged[key]
                least = 0 if key == "gpus" else 1
                if not isinstance(value, int) or isinstance(value, bool) or value < least:
                    raise ConfigError(f"{where}.{key}: an integer >= {least}, got {value!r}")
            for key in ("ready_timeout_s", "time_limit_min", "idle_timeout_s"):
                value = merged[key]
                if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                    raise ConfigError(f"{where}.{key}: a positive number, got {value!r}")
            checked[name] = merged
        elif "base_url_env" in spec:
            check_external(spec, where)
            reject_unknown(spec, EXTERNAL_KEYS, where, list_known=True)
            checked[name] = dict(spec)
        elif "base_url" in spec:
            check_external(spec, where)
            reject_unknown(spec, EXTERNAL_KEYS, where, list_known=True)
            check_base_url(spec["base_url"], f"{where}.base_url")
            checked[name] = dict(spec)
        else:
            raise ConfigError(
                f"{where}: needs base_url or base_url_env (an external server), serve (a server "
                "the workflow starts), run_batch (a command that drains batch files) or backend: "
                "offline (the embedded heuristic model)"
            )
    return checked


def is_managed(spec: Mapping[str, Any]) -> bool:
    """A server the workflow starts (``serve``), or a ``run_batch`` command it runs, with
    neither an external address nor the offline backend."""
    external = {"base_url", "base_url_env", "backend"} & set(spec)
    return "serve" in spec or ("run_batch" in spec and not external)


def batch_only(binding: Mapping[str, Any]) -> bool:
    """A role whose requests all go to its endpoint's ``run_batch`` command, never online
    (Batch-API mode without ``batch_fallback: online``): it needs no server."""
    return (
        bool(binding.get("batch"))
        and bool(binding.get("run_batch"))
        and binding.get("batch_fallback", "resubmit") != "online"
    )


def check_external(spec: Mapping[str, Any], where: str) -> None:
    """An external endpoint names its secrets by environment variable only (one line each)."""
    if "base_url" in spec and "base_url_env" in spec:
        raise ConfigError(f"{where}: both base_url and base_url_env; give the URL once")
    refuse_credentials(spec.get("base_url"), f"{where}.base_url")
    check_variable(spec.get("base_url_env"), f"{where}.base_url_env")
    check_headers_env(spec.get("headers_env"), f"{where}.headers_env")


def bind_endpoints(
    models: Mapping[str, Any] | None, endpoints: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``models`` with every ``endpoint: NAME`` resolved: an external endpoint's ``base_url`` and
    ``api_key_env`` filled in, a managed one's symbolic ``endpoint://NAME``; ``endpoint`` stays,
    so the run's Models table names it. A role bound to an offline endpoint becomes the offline
    backend (without the keys only a server reads)."""
    known = check_endpoints(endpoints)
    bound: dict[str, Any] = {}
    for role, raw in (models or {}).items():
        if not isinstance(raw, Mapping) or "endpoint" not in raw:
            bound[role] = raw
            continue
        name = raw["endpoint"]
        where = f"config models.{role}"
        for key in ADDRESS_KEYS:
            if key in raw:
                raise ConfigError(
                    f"{where}: both endpoint and {key}; the endpoint {name!r} says where it is "
                    f"(endpoints.{name})"
                )
        if name not in known:
            raise ConfigError(
                f"{where}.endpoint: {name!r} is not defined under endpoints "
                f"(defined: {sorted(known)})"
            )
        if raw.get("backend", "openai") != "openai":
            raise ConfigError(
                f"{where}.backend: an endpoint is served over the OpenAI API (openai), "
                f"got {raw['backend']!r}"
            )
        spec = known[name]
        if spec.get("backend") == "offline":
            kept = {k: v for k, v in raw.items() if k not in SERVER_ONLY_KEYS}
            bound[role] = {**kept, "backend": "offline", "endpoint": name}  # said aloud
            continue
        if is_managed(spec):
            address = {"base_url": managed_url(name)}
        else:
            address = {key: spec[key] for key in EXTERNAL_KEYS if key in spec}
        if "run_batch" in spec:  # Batch-API mode drains the role's batch with this command
            address["run_batch"] = spec["run_batch"]
        bound[role] = {"backend": "openai", **raw, **address}
        if is_managed(spec) and "serve" not in spec and not batch_only(bound[role]):
            raise ConfigError(
                f"{where}: endpoint {name!r} runs no server (no serve), only its run_batch "
                "command: bind it from a role in Batch-API mode (batch: true) without "
                "batch_fallback: online"
            )
    return bound


@dataclass(frozen=True)
class Address:
    """Where a managed endpoint answers for this job, and how to tell why it stopped answering
    (``down()``: one line naming the endpoint and its log, or None while it runs)."""

    url: str
    down: Callable[[], str | None]


def fixed_address(url: str) -> Address:
    """An external server's real address: not the workflow's to watch, never reported down."""
    return Address(url, lambda: None)


def hide_addresses(specs: dict[str, Any], addresses: dict[str, Address]) -> dict[str, Any]:
    """``specs`` (role -> EndpointSpec) with every real ``base_url`` replaced by its redacted form,
    which ``addresses`` then maps to the real one (a mapping already given is kept: a job's
    addresses from its config). So what a gateway logs or records never holds a real URL; only
    the backend that calls it is given the address."""
    hidden = {}
    for role, spec in specs.items():
        url = (getattr(spec, "base_url", None) or "").strip().rstrip("/")
        public = redact(url) if url else url
        if public != url:
            addresses.setdefault(public, fixed_address(url))
            spec = dataclasses.replace(spec, base_url=public)
        hidden[role] = spec
    return hidden
