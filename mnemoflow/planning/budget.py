"""``budget_usd``: a run whose plan exceeds it refuses to start, when the workflow is parsed.

``rules/common.smk`` calls :func:`check_budget` at parse time, so ``mnemoflow run``, ``make run``
and plain ``snakemake`` all refuse. Without ``budget_usd`` it returns at once and imports nothing
(an offline run pays nothing and plans nothing).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mnemoflow.errors import ConfigError

log = logging.getLogger("mnemoflow")

#: Set by ``mnemoflow plan`` for its dry run: the parse writes the config there, checks no budget.
DUMP_ENV = "MNEMOFLOW_PLAN_DUMP"


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
    budget = config.get("budget_usd")
    if budget is None or not main_process:
        return
    from mnemoflow.llm.types import resolved_spec
    from mnemoflow.prices import FREE_BACKENDS

    models = config.get("models") or {}
    if all(resolved_spec(models, role).backend in FREE_BACKENDS for role in models):
        return  # every role runs on this machine: the run costs $0
    from mnemoflow.planning.run import plan_run

    plan = plan_run(config, Path.cwd(), model_rules=model_rules, priced_only=True)
    total = plan.usd()
    if total is None:
        raise ConfigError(
            f"config budget_usd: the plan's total is unknown: no price for "
            f"{', '.join(plan.unpriced())} (set prices: in config)"
        )
    if total > float(budget):
        raise ConfigError(
            f"config budget_usd: the plan's total is ${total:.6f} "
            f"({round(plan.to_dict()['calls'])} calls), over the budget of ${float(budget):g}; "
            "`mnemoflow plan` shows where it goes"
        )
    log.info("budget_usd %s: the plan's total is $%.6f", budget, total)
