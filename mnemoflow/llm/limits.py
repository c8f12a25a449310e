"""Endpoint limits that hold for a whole workflow run, not per job.

A role's ``concurrency`` and ``requests_per_minute`` bound one process; a run has many jobs at
once (``--cores 8`` locally, ``--jobs 50`` on SLURM). So every endpoint (a ``base_url``) is also a
Snakemake *global resource*, ``endpoint_<host_port_pathhash>``, whose budget is the endpoint's
concurrency; every job that calls it holds a share ``s`` of that budget (``resources:``) and runs
with ``s`` requests in flight and ``requests_per_minute * s / budget``, shared by all of the job's
roles bound to that endpoint. Snakemake's scheduler (the main process, also for jobs it submits to
SLURM) starts a job only while the shares held sum to at most the budget, so the whole run never
has more than ``concurrency`` requests in flight nor more than ``requests_per_minute`` per minute.

The share is ``max(1, concurrency // endpoint_jobs)``: ``endpoint_jobs`` (config, default 4) jobs
may call one endpoint side by side; more jobs of the kind wait for a share, not for the server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mnemoflow.llm.addresses import redact
from mnemoflow.llm.types import ROLES, EndpointSpec, resolved_spec

#: Jobs that may call one endpoint at the same time, each with an equal share of its limits.
DEFAULT_ENDPOINT_JOBS = 4


def endpoint_resource(base_url: str) -> str:
    """Snakemake resource name of an endpoint: readable, stable, a valid identifier, made of the
    address's redacted form (host, port and a hash of the path: no path segment, which could be
    a token, is ever a resource name).

    ``http://127.0.0.1:8000/v1`` -> ``endpoint_127_0_0_1_8000_<hash of /v1>``. Two addresses that
    differ only in punctuation share a name, and so a budget: the safe side.
    """
    address = re.sub(r"^[a-z]+://", "", (redact(base_url.strip().rstrip("/")) or "").lower())
    address = address.replace("/redacted-", "_")
    return "endpoint_" + (re.sub(r"[^a-z0-9]+", "_", address).strip("_") or "default")


def _endpoints(models: dict[str, Any], roles) -> dict[str, list[EndpointSpec]]:
    """Network-bound specs of the given roles, grouped by resource name; an unbound role takes
    the binding it falls back to, as the gateway does (``ROLE_DEFAULTS``)."""
    models = models or {}
    grouped: dict[str, list[EndpointSpec]] = {}
    for role in roles:
        spec = resolved_spec(models, role)
        if spec.backend == "openai" and spec.base_url:
            grouped.setdefault(endpoint_resource(spec.base_url), []).append(spec)
    return grouped


def endpoint_budgets(models: dict[str, Any]) -> dict[str, int]:
    """Global budget of every endpoint: the smallest ``concurrency`` of the roles bound to it."""
    return {
        name: min(spec.concurrency for spec in specs)
        for name, specs in _endpoints(models, ROLES).items()
    }


@dataclass(frozen=True)
class JobLimits:
    """What one job declares (``resources``) and receives (``params``: the redacted base_url ->
    its limits)."""

    resources: dict[str, int]
    params: dict[str, dict[str, Any]]


def job_limits(
    models: dict[str, Any], roles, endpoint_jobs: int = DEFAULT_ENDPOINT_JOBS
) -> JobLimits:
    """The share of each endpoint a job calling ``roles`` holds, and its in-job limits."""
    if not isinstance(endpoint_jobs, int) or isinstance(endpoint_jobs, bool) or endpoint_jobs < 1:
        raise ValueError(f"config endpoint_jobs: a positive integer, got {endpoint_jobs!r}")
    every = _endpoints(models, ROLES)
    resources: dict[str, int] = {}
    params: dict[str, dict[str, Any]] = {}
    for name, specs in _endpoints(models, roles).items():
        budget = min(spec.concurrency for spec in every[name])
        share = max(1, budget // endpoint_jobs)
        rates = [s.requests_per_minute for s in every[name] if s.requests_per_minute]
        rpm = min(rates) * share / budget if rates else None
        resources[name] = share
        for spec in specs:
            params[redact(spec.base_url.strip().rstrip("/"))] = {
                "resource": name,
                "concurrency": share,
                "requests_per_minute": rpm,
            }
    return JobLimits(resources, params)
