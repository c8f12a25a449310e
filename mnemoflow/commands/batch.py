"""``mnemoflow batch submit|status|collect [snakemake args]``: Batch-API mode, submit and leave.

By default a job in Batch-API mode waits for its batch. On a cluster, where no allocation should
sit polling for hours, ``submit`` runs the workflow with every Batch-API job submitting its
batch and stopping (it fails, saying so); ``status`` lists the outstanding batches of the run's
batch roles; ``collect`` puts the finished ones' replies into the response cache (``--wait``:
polls until they finish). Then ``mnemoflow run`` runs on the cached replies, and the jobs count
them as batch calls. The arguments are those of ``mnemoflow run`` (``--configfile F``, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

from mnemoflow import layout
from mnemoflow.commands import COMMANDS
from mnemoflow.commands.run import ROOT, snakemake_command
from mnemoflow.config_schema import check_config_files, config_files, read_config_file
from mnemoflow.llm.batch_mode import SUBMIT_ONLY_ENV, BatchStore, collect_for_later
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.gateway import Gateway


@COMMANDS.register(
    "batch",
    help="Batch-API mode, submit and leave: submit, status, collect "
    "(extra arguments go to snakemake, as for run)",
)
def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("submit", "status", "collect"))
    parser.add_argument(
        "--wait", action="store_true", help="collect: poll until every batch has finished"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    extra = list(getattr(args, "extra", []))
    if args.action == "submit":
        env = {**os.environ, SUBMIT_ONLY_ENV: "1"}
        return subprocess.call(snakemake_command([*extra, "--keep-going"]), cwd=ROOT, env=env)
    workdir, config = run_config(extra)
    collect = args.action == "collect"
    with contextlib.chdir(workdir):  # the config's cache path, as the run reads it
        found = asyncio.run(outstanding(config, wait=collect and args.wait, collect=collect))
    for record, status in found:
        print(f"{record['id']}\t{record['role']}\t{len(record['custom_ids'])} requests\t{status}")
    if not found:
        print("no outstanding Batch-API batches")
    return 0


def run_config(extra: list[str]) -> tuple[Path, dict[str, Any]]:
    """The working directory and the config a run with snakemake arguments ``extra`` reads:
    its ``config.yaml`` with each ``--configfile`` merged over it, key by key (as Snakemake)."""
    workdir, files = config_files(extra, ROOT)  # as the run reads them
    check_config_files(extra, ROOT)  # file and line of a YAML error
    config: dict[str, Any] = {}
    for path in [workdir / "config.yaml", *files]:
        if path.is_file():
            _merge(config, read_config_file(path) or {})
    return workdir, config


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


async def outstanding(
    config: dict[str, Any], wait: bool, collect: bool
) -> list[tuple[dict[str, Any], str]]:
    """The outstanding batches of the config's batch roles (``collect``: finished ones into
    the cache)."""
    models = bind_endpoints(config.get("models"), config.get("endpoints"))
    cache = config.get("cache") or layout.CACHE
    gateway = Gateway.from_config(models, cache_path=Path(cache), prices=config.get("prices"))
    store = BatchStore.beside(gateway.cache.directory)
    try:
        if not collect:
            return await collect_for_later(gateway, store, wait=False, store_replies=False)
        return await collect_for_later(gateway, store, wait=wait)
    finally:
        gateway.close()
