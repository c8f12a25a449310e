"""What every job shares: the run's keys, its model environment, and the one way a script runs it.

A job is ``job(files, run, env, **params)``: ``files`` a dataclass whose field names are the rule's
own input / output names, ``run`` the run's keys (from the wildcards), ``env`` the models, limits,
cache and seed it calls models with, and the rule's remaining ``params`` by their own names. So a
script is one call, :func:`run`, and a test calls the job with the same three objects.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import sys
import time
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from mnemoflow.data.integrity import record_outputs
from mnemoflow.data.tables import RUN_KEYS, empty, read_table, write_atomic_text
from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.jobs.progress import Progress
from mnemoflow.jobs.run_batch import slurm_drain
from mnemoflow.llm.addresses import is_redacted, real_addresses
from mnemoflow.llm.endpoints import (
    Address,
    batch_only,
    bind_endpoints,
    check_endpoints,
    fixed_address,
    managed_name,
    managed_url,
)
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.types import EndpointError
from mnemoflow.ops import endpoints as endpoint_ops

#: The jobs' logger: job_log sends it to the rule's log file.
log = logging.getLogger("mnemoflow")

#: Loggers that would write a line per model call into a job's log (httpx2: the openai client's).
QUIET_LOGGERS = ("httpx", "httpx2")

#: Params every rule may carry that are not the job's own: ``code`` only re-runs the job when its
#: code changes; ``models``, ``limits`` and ``seed`` make up the :class:`JobEnv`.
ENV_PARAMS = ("models", "limits", "seed")


@dataclass(frozen=True)
class RunKeys:
    """Which run a job belongs to, from the rule's wildcards (static QA's protocol is ``qa``)."""

    benchmark: str
    system: str = ""
    protocol: str = "qa"
    step: int = 0
    shard: int = 0
    user: int = 0  # environment generation: the persona's index

    @classmethod
    def from_wildcards(cls, wildcards: Any) -> RunKeys:
        types = typing.get_type_hints(cls)
        return cls(**{name: types[name](value) for name, value in wildcards.items()})

    def row(self) -> dict[str, Any]:
        """The run-key columns of every table (``data.tables.RUN_KEYS``)."""
        return {name: getattr(self, name) for name, _ in RUN_KEYS}

    def label(self) -> str:
        return f"{self.benchmark}/{self.system} {self.protocol} step {self.step}"


@dataclass(frozen=True)
class JobEnv:
    """The models a job calls, its share of their endpoints, the shared response cache, the seed,
    and the config's ``prices:`` (the ledger's dollars).

    ``cache`` and ``prices`` are read from the config, not from params: neither changes a result,
    so changing them re-runs no job (a price changed later is applied by the summary and report,
    which re-price the ledgers' tokens).
    """

    models: dict[str, Any] = dataclasses.field(default_factory=dict)
    limits: dict[str, Any] | None = None
    cache: str | None = None
    seed: int = 0
    prices: dict[str, Any] | None = None
    #: The config's ``endpoints:`` (read from the config like ``cache``: a managed endpoint's
    #: command or resources do not change a reply, so editing them re-runs no job).
    endpoints: dict[str, Any] | None = None
    #: The config's bindings as written (``models:`` and the panel's, :func:`config_bindings`):
    #: where the job finds the real address of each role whose ``models`` param names it only
    #: by its redacted form (docs/gateway.md, "Secrets").
    bindings: dict[str, Any] | None = None

    def gateway(self) -> Gateway:
        """Use it as ``async with env.gateway() as gateway``. Only the roles of the job's
        ``models`` param are bound (and a critic whose judge is): a role the rule does not pass
        fails when used, never silently runs the default offline binding.

        A role bound to a managed endpoint (``endpoint://NAME``) gets the running server's
        address; the server is started first when nothing serves it, and this job holds a lease
        on it until the gateway is closed (:mod:`mnemoflow.ops.endpoints`)."""
        given = self.given_addresses()
        addresses, leases = self.managed_addresses()
        return Gateway.from_config(
            self.models,
            self.cache,
            self.limits,
            only_given=True,
            prices=self.prices,
            addresses={**given, **addresses},
            on_close=tuple(lease.release for lease in leases),
            drain_command=slurm_drain(self.endpoints),
        )

    def given_addresses(self) -> dict[str, Address]:
        """The real address of every role the ``models`` param names by its redacted form, found
        in the config (a params file, a ledger or a log never holds one)."""
        found = real_addresses(bind_endpoints(self.bindings, self.endpoints))
        for role, spec in self.models.items():
            url = spec.get("base_url") if isinstance(spec, dict) else None
            if is_redacted(url) and url not in found:
                raise ConfigError(
                    f"config models.{role}.base_url: no address in the config's models or "
                    f"endpoints is {url}"
                )
        return {public: fixed_address(url) for public, url in found.items()}

    def managed_addresses(self) -> tuple[dict[str, Address], list[endpoint_ops.Lease]]:
        """A lease on each managed endpoint a role of the job calls online (a role whose
        batches its endpoint's ``run_batch`` command drains starts no server)."""
        names = sorted(
            {
                name
                for spec in self.models.values()
                if isinstance(spec, dict)
                and not batch_only(spec)
                and (name := managed_name((spec.get("base_url") or "").rstrip("/")))
            }
        )
        if not names:
            return {}, []
        known = check_endpoints(self.endpoints)
        addresses: dict[str, Address] = {}
        leases: list[endpoint_ops.Lease] = []
        try:
            for name in names:
                if name not in known:
                    raise ConfigError(f"config endpoints: {name!r} is not defined")
                try:
                    lease = endpoint_ops.ensure(name, known[name])
                except endpoint_ops.EndpointDown as exc:
                    raise EndpointError(str(exc)) from None
                leases.append(lease)
                addresses[managed_url(name)] = Address(lease.url, lease.down)
        except BaseException:
            for lease in leases:
                lease.release()
            raise
        return addresses, leases


def tick(bar: Progress) -> Callable[[bool | None], None]:
    """Adapt a progress bar to the protocols' per-item callback (cache hit or None)."""
    return lambda cache_hit: bar.update(1, cache_hit=cache_hit)


def write_ledger(gateway: Gateway, path: str | Path, **extra: Any) -> None:
    """The gateway's calls, tokens and role bindings (no key), beside the job's output."""
    write_atomic_text(path, gateway.ledger.to_json({"roles": gateway.describe(), **extra}))
    totals = gateway.ledger.totals()
    log.info(
        "%s: %d model calls, %d cache hits, %d tokens in, %d out, %d parse failures",
        extra.get("stage", "job"),
        totals.calls,
        totals.cache_hits,
        totals.tokens_in,
        totals.tokens_out,
        totals.parse_failures,
    )


def config_bindings(config: dict[str, Any]) -> dict[str, Any] | None:
    """Every binding the config gives a model: ``models.*`` and each ``judge.panel[i].model``;
    a job finds among them the real address its params name by its redacted form."""
    panel = (config.get("judge") or {}).get("panel") or []
    extra = {
        f"judge.panel[{i}]": entry["model"]
        for i, entry in enumerate(panel)
        if isinstance(entry, dict) and isinstance(entry.get("model"), dict)
    }
    return {**(config.get("models") or {}), **extra} if extra else config.get("models")


@contextmanager
def job_log(path: str | Path | None) -> Iterator[None]:
    """Send this job's logging and stderr to the rule's log file (Snakemake style)."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        old_stderr = sys.stderr
        sys.stderr = handle
        logging.basicConfig(
            stream=handle, level=logging.INFO, format="%(asctime)s %(message)s", force=True
        )
        # The HTTP client logs every request at INFO ("HTTP Request: POST ..."): one line per model
        # call costs client CPU on the event loop and buries the job's own lines; the ledger counts
        # the calls. Its warnings and errors still reach the log.
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        try:
            yield
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            sys.stderr = old_stderr


def plain_params(params: Any) -> dict[str, Any]:
    """Snakemake's Params object as a plain dict (a JSON round trip drops Snakemake's wrappers).

    ``code`` (every rule's fingerprint of the package code it runs, see ``mnemoflow.codeversion``)
    is there only so that Snakemake re-runs the job when that code changes; no job reads it.
    """
    plain = json.loads(json.dumps(dict(params.items())))
    plain.pop("code", None)
    return plain


def files_of(cls: type, smk: Any) -> Any:
    """The rule's input and output files as ``cls``, field by field under the rule's own names.

    A ``list[str]`` field takes every file; a ``str | None`` field takes None for an input
    function that returned nothing (step 0's previous snapshot); a field with a default may be
    missing from the rule (the replay source of the on-policy rule).
    """
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        found = [part for part in (smk.input, smk.output) if field.name in part.keys()]
        if len(found) > 1:
            raise ValueError(f"{cls.__name__}.{field.name}: both an input and an output")
        if not found:
            if field.default is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}.{field.name}: not a file of the rule")
            continue
        value = getattr(found[0], field.name)
        hint = hints[field.name]
        if typing.get_origin(hint) is list:
            values[field.name] = [str(v) for v in value]
        elif isinstance(value, str):
            values[field.name] = value
        else:  # an input function's list: one file, or none (an optional input)
            items = list(value)
            values[field.name] = str(items[0]) if items else None
    return cls(**values)


def run_wildcards(wildcards: Any) -> dict[str, str]:
    """A job's wildcards but ``repeat`` (``repeats:``): a repeat's job is the run's job with
    another seed (its env's ``seed`` and models), its tables keyed like repeat 0's."""
    return {name: value for name, value in wildcards.items() if name != "repeat"}


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere).

    A job logs it when its function is called: the job's start-up (interpreter, Snakemake's script
    preamble, imports), which ``bench.startup`` sums over a run's logs.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime", encoding="ascii") as uptime:
            return float(uptime.read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return None


def run(smk: Any, job: Callable[..., Any]) -> None:
    """Run ``job`` for the Snakemake rule ``smk`` in its log: files, run keys, env and params.

    Every script is this one call; a param the job does not take is an error, so a rule and its
    job cannot drift apart silently. The log's first line is the job's start-up and its last the
    job's own time (``job start-up 0.91 s`` / ``job done in 2.40 s``). A job that fails ends
    in one line on the console (:func:`failure_line`); its traceback is in the log.
    """
    try:
        _run(smk, job)
    except Exception as exc:  # job_log wrote the traceback to the job's log
        print(failure_line(exc, smk.log[0] if smk.log else None), file=sys.stderr)
        raise SystemExit(1) from None


def failure_line(exc: BaseException, log_path: str | None) -> str:
    """The console's one line of a failed job: the error (a data or config error names the file,
    record and field itself; another error its type) and where its traceback is."""
    text = " ".join(str(exc).split()) or "no message"
    kind = "" if isinstance(exc, ConfigError | DataError) else f"{type(exc).__name__}: "
    where = f" (traceback: {log_path})" if log_path else ""
    return f"{kind}{text}{where}"


def _run(smk: Any, job: Callable[..., Any]) -> None:
    startup = process_age()
    with job_log(smk.log[0]):
        if startup is not None:
            log.info("job start-up %.2f s", startup)
        began = time.perf_counter()
        params = plain_params(smk.params)
        signature = inspect.signature(job)
        hints = typing.get_type_hints(job)
        arguments: dict[str, Any] = {}
        for name in signature.parameters:
            if name == "files":
                arguments[name] = files_of(hints[name], smk)
            elif name == "run":
                arguments[name] = RunKeys.from_wildcards(run_wildcards(smk.wildcards))
            elif name == "env":
                env = {k: params[k] for k in ENV_PARAMS if k in params}
                config = smk.config
                arguments[name] = JobEnv(
                    cache=config.get("cache"),
                    prices=config.get("prices"),
                    endpoints=config.get("endpoints"),
                    bindings=config_bindings(config),
                    **env,
                )
            elif name in params:
                arguments[name] = params[name]
        unused = sorted(set(params) - set(arguments) - set(ENV_PARAMS))
        if unused:
            raise TypeError(f"{job.__module__}.{job.__name__}: params it does not take {unused}")
        job(**arguments)
        record_ledger_outputs(smk)
        log.info("job done in %.2f s", time.perf_counter() - began)


def record_ledger_outputs(smk: Any) -> None:
    """A rule with a ``ledger`` output lists its other output files' sizes and sha256 in it
    (``outputs``), so ``mnemoflow verify`` finds one changed with its mtime kept."""
    if "ledger" not in smk.output.keys():
        return
    ledger = str(smk.output.ledger)
    record_outputs(ledger, [str(path) for path in smk.output if str(path) != ledger])


def read_all(paths: list[str], schema: pa.Schema | str) -> pd.DataFrame:
    """Every file's rows as one table (the schema's empty table when there are none)."""
    frames = [read_table(path, schema) for path in paths]
    return pd.concat(frames, ignore_index=True) if frames else empty(schema)
