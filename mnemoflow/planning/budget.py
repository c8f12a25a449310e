"""``budget_usd``: a run whose plan exceeds it refuses to start, when the workflow is parsed;
so does a run with a role set to ``overflow: abort`` whose plan has prompts over its window.

``rules/common.smk`` calls :func:`check_budget` at parse time, so ``mnemoflow run``, ``make run``
and plain ``snakemake`` all refuse. Without ``budget_usd`` it returns at once and imports nothing
(an offline run pays nothing and plans nothing). The plan's totals are kept under
``.snakemake/mnemoflow-plan/``, keyed by the config, the planner's code, the finished jobs' ledgers
and the response cache's shards, so parsing the same run again (a dry run, then the run) plans once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mnemoflow.errors import ConfigError
from mnemoflow.layout import CACHE

log = logging.getLogger("mnemoflow")

#: Set by ``mnemoflow plan`` for its dry run: the parse writes the config there, checks no budget.
DUMP_ENV = "MNEMOFLOW_PLAN_DUMP"


def planning() -> bool:
    """Whether this parse is ``mnemoflow plan``'s dry run (it calls no model: no key needed)."""
    return bool(os.environ.get(DUMP_ENV))


def check_budget(
    config: Mapping[str, Any], main_process: bool = True, model_rules: Iterable[str] = ()
) -> None:
    """``budget_usd``: refuse a run whose plan exceeds it, in one line naming the plan's total.

    Nothing happens without ``budget_usd`` (an offline run pays nothing and plans nothing), in a
    job's own process (Snakemake re-parses the workflow for every job) and for ``mnemoflow plan``'s
    own dry run, which only writes the config it parsed (``MNEMOFLOW_PLAN_DUMP``).
    """
    dump = os.environ.get(DUMP_ENV)
    if dump and main_process:
        payload = {"config": config, "workdir": os.getcwd(), "model_rules": list(model_rules)}
        Path(dump).write_text(json.dumps(payload, default=str), encoding="utf-8")
        return
    if not main_process:
        return
    check_overflow_abort(config, model_rules)
    budget = config.get("budget_usd")
    if budget is None:
        return
    from mnemoflow.llm.types import resolved_spec
    from mnemoflow.prices import FREE_BACKENDS

    models = config.get("models") or {}
    if all(resolved_spec(models, role).backend in FREE_BACKENDS for role in models):
        return  # every role runs on this machine: the run costs $0
    found = planned_totals(config, model_rules)
    total = found["usd"]
    if total is None:
        raise ConfigError(
            f"config budget_usd: the plan's total is unknown: no price for "
            f"{', '.join(found['unpriced'])} (set prices: in config)"
        )
    if total > float(budget):
        raise ConfigError(
            f"config budget_usd: the plan's total is ${total:.6f} "
            f"({found['calls']} calls), over the budget of ${float(budget):g}; "
            "`mnemoflow plan` shows where it goes"
        )
    log.info("budget_usd %s: the plan's total is $%.6f", budget, total)


def planned_totals(config: Mapping[str, Any], model_rules: Iterable[str]) -> dict[str, Any]:
    """The plan's dollars, calls and overflows per role, planned once per state of the run."""
    found = remembered(config, Path.cwd())
    if found is None:
        from mnemoflow.planning.run import plan_run

        plan = plan_run(config, Path.cwd(), model_rules=model_rules, priced_only=True)
        data = plan.to_dict()
        found = {
            "usd": plan.usd(),
            "calls": data["calls"],
            "unpriced": plan.unpriced(),
            "overflows": data["overflows"],
        }
        remember(config, Path.cwd(), found)
    return found


def check_overflow_abort(config: Mapping[str, Any], model_rules: Iterable[str] = ()) -> None:
    """A role set to ``overflow: abort`` would stop the run at its first prompt over the context
    window: refuse the run at the start when the plan already has such prompts, with the
    planned counts per role (``fail``, the default, fails those items and goes on)."""
    from mnemoflow.llm.types import resolved_spec

    models = config.get("models") or {}
    aborting = [role for role in models if resolved_spec(models, role).overflow == "abort"]
    if not aborting:
        return
    overflows = planned_totals(config, model_rules).get("overflows") or {}
    stopping = {role: overflows[role] for role in aborting if overflows.get(role)}
    if stopping:
        counts = ", ".join(f"{role} {n}" for role, n in sorted(overflows.items()))
        roles = ", ".join(f"models.{role}.overflow" for role in sorted(stopping))
        raise ConfigError(
            f"config {roles}: abort, and the plan has prompts over the context window "
            f"({counts}); the run would stop at the first; `fail` fails those items and goes "
            "on, `truncate_oldest` cuts their oldest history (`mnemoflow plan` shows them)"
        )


#: Where the parse-time plan's totals are kept, keyed by what they depend on.
REMEMBERED = Path(".snakemake") / "mnemoflow-plan"


def state_key(config: Mapping[str, Any], workdir: Path) -> str:
    """A digest of what a parse-time plan depends on: the config, the planner's code, the ledgers
    of the jobs that have run (a finished job is not planned) and the response cache's shards."""
    planned = {key: value for key, value in config.items() if key != "budget_usd"}
    digest = hashlib.sha256(json.dumps(planned, sort_keys=True, default=str).encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    # the shipped prices and the code that renders the planned requests change the total too
    from mnemoflow.codeversion import code_version
    from mnemoflow.prices import TABLE

    digest.update(TABLE.read_bytes())
    digest.update(code_version("mnemoflow.planning.run:plan_run").encode())
    cache = workdir / Path(str(config.get("cache", CACHE)))
    stamped = [*(workdir / "results").glob("**/*.ledger.json"), *cache.glob("shards/*")]
    for path in sorted(stamped):
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def remembered(config: Mapping[str, Any], workdir: Path) -> dict[str, Any] | None:
    path = workdir / REMEMBERED / f"{state_key(config, workdir)}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def remember(config: Mapping[str, Any], workdir: Path, totals: dict[str, Any]) -> None:
    folder = workdir / REMEMBERED
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{state_key(config, workdir)}.json"
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(totals), encoding="utf-8")
    temporary.replace(path)
