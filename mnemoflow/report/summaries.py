"""The numbers a report shows, computed from result tables (no plotting, no HTML, no files).

Every number here is traced to rows: scores come from the summary table as written by the score
rule, intervals from the per-question judgements behind them, costs from the gateway's ledgers.
A confidence interval is attached to a score only when the judgements reproduce that score (same
mean, same n); otherwise the report says so instead of drawing an interval around another number.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mnemoflow.data.tables import MEMORY_FAILURES
from mnemoflow.prices import FREE_BACKENDS, batch_usd, price_table, usd
from mnemoflow.report.seeds import MEAN as SEEDS_MEAN
from mnemoflow.report.stats import mean_interval, wilson_interval

RUN = ["benchmark", "system", "protocol", "step"]
#: Outcomes of the DIAGNOSIS table, in the order the report stacks them; they add up to 1.
OUTCOMES = ("correct", *MEMORY_FAILURES, "undiagnosable", "unjudged")
#: Ledger counters of what went wrong or was worked around: zero in a clean run (the report's
#: tables leave out those that are zero in every row).
LEDGER_INCIDENTS = (
    "retries",
    "errors",
    "parse_failures",
    "dropped_events",
    "cached_in",
    "truncated_calls",
    "truncated_messages",
)
_LEDGER_COUNTERS = (
    "calls",
    "cache_hits",
    "tokens_in",
    "tokens_out",
    "latency_s",
    *LEDGER_INCIDENTS,
)
#: Largest difference between a summary value and the mean of its judgements still called equal.
_TOLERANCE = 1e-6


class ReportError(ValueError):
    """An input of the report is malformed; the message names the file, record and field."""


def add_labels(frame: pd.DataFrame, protocols: Iterable[str] | None = None) -> pd.DataFrame:
    """Add ``label``: the system name, with the protocol when the results hold several."""
    frame = frame.copy()
    protocols = set(frame["protocol"]) if protocols is None else set(protocols)
    if len(protocols) > 1:
        frame["label"] = frame["system"] + " · " + frame["protocol"]
    else:
        frame["label"] = frame["system"]
    return frame


def last_step(frame: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """Rows of each run's last step: the state a system reaches after all of its history."""
    keys = keys or ["benchmark", "system", "protocol"]
    if frame.empty:
        return frame
    final = frame.groupby(keys)["step"].transform("max")
    return frame[frame["step"] == final]


def question_values(judgements: pd.DataFrame) -> pd.DataFrame:
    """One value per run, metric and question (repeated judgements of a question are averaged)."""
    keys = [*RUN, "metric", "question_id", "question_type"]
    if judgements.empty:
        return pd.DataFrame(columns=[*keys, "value"])
    return judgements.groupby(keys, as_index=False, dropna=False)["value"].mean()


def lower_is_better(metric: str) -> bool:
    """Failure rates (``write_failure_rate``, ``undiagnosable_rate``...) are better when low."""
    return metric.endswith("_rate")


def is_proportion(metric: str) -> bool:
    """Metrics that are means of per-question values in [0, 1] (shares, recall, NDCG, F1)."""
    return (
        lower_is_better(metric)
        or metric in ("accuracy", "j", "f1", "judge_agreement")
        or any(part in metric for part in ("recall", "ndcg"))
    )


def with_intervals(summary: pd.DataFrame, judgements: pd.DataFrame) -> pd.DataFrame:
    """The summary with ``ci_low``, ``ci_high`` and ``ci_method`` on micro and per-type rows.

    ``ci_method`` is "wilson" or "bootstrap" (see :mod:`mnemoflow.report.stats`) from the
    per-question judgements; "wilson-n" for a proportion without judgements (retrieval recall,
    failure rates): the Wilson interval of ``value`` out of ``n``, which for a mean of graded values
    in [0, 1] is conservative (their variance is at most p(1 - p)); "no judgements" for other
    metrics without them; "mismatch" when the judgements do not reproduce the summary value; ""
    for macro rows (a mean of per-type means has no per-question sample to resample here).
    """
    values = question_values(judgements)
    groups = {key: group["value"] for key, group in values.groupby([*RUN, "metric"])}
    by_type = {
        key: group["value"] for key, group in values.groupby([*RUN, "metric", "question_type"])
    }
    low, high, method = [], [], []
    for row in summary.itertuples(index=False):
        run = (row.benchmark, row.system, row.protocol, row.step, row.metric)
        if row.aggregate == "micro":
            sample = groups.get(run)
        elif row.aggregate.startswith("type:"):
            sample = by_type.get((*run, row.aggregate.removeprefix("type:")))
        else:
            low.append(math.nan), high.append(math.nan), method.append("")
            continue
        if sample is None:
            if is_proportion(row.metric) and row.n > 0 and 0.0 <= row.value <= 1.0:
                interval = wilson_interval(row.value * row.n, int(row.n))
                low.append(interval[0]), high.append(interval[1]), method.append("wilson-n")
            else:
                low.append(math.nan), high.append(math.nan), method.append("no judgements")
            continue
        interval = mean_interval(sample.to_numpy())
        if interval.n != row.n or abs(interval.mean - row.value) > _TOLERANCE:
            low.append(math.nan), high.append(math.nan), method.append("mismatch")
            continue
        low.append(interval.low), high.append(interval.high), method.append(interval.method)
    out = summary.copy()
    out["ci_low"], out["ci_high"], out["ci_method"] = low, high, method
    return out


def score_table(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per benchmark, run and metric at the run's last step: micro [CI], macro, n."""
    final = last_step(scored)
    micro = final[final["aggregate"] == "micro"]
    macro = final[final["aggregate"] == "macro"][[*RUN, "metric", "value"]]
    table = micro.merge(macro, on=[*RUN, "metric"], how="left", suffixes=("", "_macro"))
    table = table.rename(columns={"value": "micro", "value_macro": "macro"})
    columns = ["benchmark", "label", "system", "protocol", "step", "metric", "micro"]
    columns += ["ci_low", "ci_high", "ci_method", "macro", "n"]
    table = table[columns].sort_values(
        ["benchmark", "metric", "micro", "label"], ascending=[True, True, False, True]
    )
    return table.reset_index(drop=True)


def type_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Per-question-type values at the last step: rows (benchmark, metric, type), columns runs."""
    final = last_step(scored)
    typed = final[final["aggregate"].str.startswith("type:")].copy()
    if typed.empty:
        return pd.DataFrame()
    typed["question_type"] = typed["aggregate"].str.removeprefix("type:")
    return typed.pivot_table(
        index=["benchmark", "metric", "question_type"],
        columns="label",
        values="value",
        aggfunc="first",
    )


def step_table(scored: pd.DataFrame) -> pd.DataFrame:
    """Micro scores of runs observed at more than one step (the score-vs-step curves)."""
    micro = scored[scored["aggregate"] == "micro"]
    steps = micro.groupby(["benchmark", "system", "protocol", "metric"])["step"].transform(
        "nunique"
    )
    return micro[steps > 1].sort_values([*RUN, "metric"]).reset_index(drop=True)


# --- diagnosis -------------------------------------------------------------------------------


def check_diagnosis(diagnosis: pd.DataFrame, where: str) -> None:
    """Reject unknown outcomes, rates that are not shares, and outcomes that add up to over 1."""
    for index, row in enumerate(diagnosis.itertuples(index=False)):
        record = f"{where}: row {index} ({row.benchmark}/{row.system} step {row.step})"
        if row.failure not in OUTCOMES:
            raise ReportError(f"{record}: 'failure' must be one of {OUTCOMES}, got {row.failure!r}")
        if not 0.0 <= row.rate <= 1.0:
            raise ReportError(f"{record}: 'rate' must be within 0..1, got {row.rate}")
        if row.n < 0:
            raise ReportError(f"{record}: 'n' must be >= 0, got {row.n}")
    sums = diagnosis.groupby(["benchmark", "system", "step", "question_type"])["rate"].sum()
    over = sums[sums > 1.0 + _TOLERANCE]
    if not over.empty:
        (benchmark, system, step, qtype), total = next(iter(over.items()))
        raise ReportError(
            f"{where}: {benchmark}/{system} step {step} type {qtype!r}: outcome rates add up to "
            f"{total:.3f} > 1 (outcomes must be exclusive)"
        )


def diagnosis_overall(diagnosis: pd.DataFrame) -> pd.DataFrame:
    """Outcome shares per benchmark and system at the last step, over all question types.

    Uses the ``question_type == "all"`` rows when the producer wrote them; otherwise weights each
    type's rate by its number of questions (a micro average, like the micro score).
    """
    if diagnosis.empty:
        return diagnosis.assign(rate=[])
    final = last_step(diagnosis, ["benchmark", "system"])
    rows = []
    for (benchmark, system, step), group in final.groupby(["benchmark", "system", "step"]):
        overall = group[group["question_type"] == "all"]
        for failure in OUTCOMES:
            if not overall.empty:
                part = overall[overall["failure"] == failure]
                rate = float(part["rate"].sum())
                n = int(part["n"].max()) if not part.empty else int(overall["n"].max())
            else:
                part = group[group["failure"] == failure]
                per_type = group.groupby("question_type")["n"].max()
                n = int(per_type.sum())
                rate = float((part["rate"] * part["n"]).sum() / n) if n else 0.0
            rows.append((benchmark, system, step, failure, rate, n))
    return pd.DataFrame(rows, columns=["benchmark", "system", "step", "failure", "rate", "n"])


# --- ledgers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerFile:
    label: str
    data: dict[str, Any]
    path: str = ""  # where it was read: its folders name the run (see run_of)


def structured_forms(ledgers: list[LedgerFile]) -> dict[str, str]:
    """Role -> the forms of ``response_format`` its requests ended on, over the run's ledgers
    (their ``structured_output``; several, comma-separated, when jobs ended differently)."""
    forms: dict[str, set[str]] = {}
    for ledger in ledgers:
        for role, form in (ledger.data.get("structured_output") or {}).items():
            forms.setdefault(role, set()).add(str(form))
    return {role: ", ".join(sorted(seen)) for role, seen in sorted(forms.items())}


def load_ledger(path: str | Path, label: str | None = None) -> LedgerFile:
    """Read one ledger written by ``Ledger.to_json``; check the fields the report uses."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read ledger JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: a ledger must be a JSON object, got {type(data).__name__}")
    for field in ("models", "totals", "by_role_task"):
        if not isinstance(data.get(field), dict):
            raise ReportError(f"{path}: field '{field}' must be an object")
    for key, entry in data["by_role_task"].items():
        if "/" not in key:
            raise ReportError(f"{path}: by_role_task key {key!r} is not 'role/task'")
        for counter in _LEDGER_COUNTERS:
            value = entry.get(counter, 0)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ReportError(
                    f"{path}: by_role_task[{key!r}].{counter} must be a number >= 0, got {value!r}"
                )
    return LedgerFile(label or str(path), data, str(path))


FAILED_ITEMS_NOTE = (
    "items failed: a prompt did not fit its role's context window (`overflow: fail`), so it "
    "was not sent. They are unscored (`<metric>:unscored`; `<metric>:all` counts them wrong) "
    "and the run went on."
)


def failed_items_table(ledgers: Iterable[LedgerFile]) -> pd.DataFrame:
    """The items whose call was not sent (a prompt over the role's context window, ``overflow:
    fail``), one row each: ledger, item, reason (summary.md and report.html list them)."""
    rows = [
        (ledger.label, item, reason)
        for ledger in ledgers
        for item, reason in sorted((ledger.data.get("failed_items") or {}).items())
    ]
    return pd.DataFrame(rows, columns=["ledger", "item", "reason"])


def failed_items_lines(ledgers: Iterable[LedgerFile], shown: int = 50) -> list[str]:
    """summary.md's list of the failed items (:func:`failed_items_table`), named with their
    ledger while the run went on. No lines when none failed."""
    rows = list(failed_items_table(ledgers).itertuples(index=False, name=None))
    if not rows:
        return []
    lines = [
        "## Failed items",
        "",
        f"{len(rows)} {FAILED_ITEMS_NOTE}",
        "",
        "| ledger | item | reason |",
        "|---|---|---|",
    ]
    for label, item, reason in rows[:shown]:
        lines.append(f"| {label} | {item} | {reason.replace('|', '/')} |")
    if len(rows) > shown:
        lines.append(f"| … | {len(rows) - shown} more | the ledgers' `failed_items` list all |")
    return [*lines, ""]


def ledger_labels(paths: list[Path]) -> list[str]:
    """Short names for ledger files: their paths relative to the deepest common folder."""
    if not paths:
        return []
    if len(paths) == 1:
        return [str(paths[0])]
    resolved = [Path(p).resolve() for p in paths]
    common = Path(os.path.commonpath([str(p.parent) for p in resolved]))
    return [str(p.relative_to(common)) for p in resolved]


def _cost(ledger: LedgerFile, role: str, counters: dict[str, Any], prices: Mapping) -> float:
    """Dollars of one role/task entry at ``prices``, keyed by the model the role binds (the
    ``roles`` the gateway described; older ledgers: the model the endpoint named). A local
    backend costs nothing; a model without a price is NaN, never a guess. Tokens that came
    through a Batch-API batch (``batch_tokens_in`` / ``_out``) cost the batch prices."""
    binding = (ledger.data.get("roles") or {}).get(role) or {}
    if binding.get("backend") in FREE_BACKENDS:
        return 0.0
    model = binding.get("model") or ledger.data["models"].get(role, "?")
    tokens_in, tokens_out = int(counters["tokens_in"]), int(counters["tokens_out"])
    batch_in, batch_out = (int(counters.get(f"batch_tokens_{k}", 0)) for k in ("in", "out"))
    online = usd(
        model, tokens_in - batch_in, int(counters["cached_in"]), tokens_out - batch_out, prices
    )
    batched = batch_usd(model, batch_in, batch_out, prices) if batch_in or batch_out else 0.0
    dollars = None if online is None or batched is None else online + batched
    if dollars is None:
        return 0.0 if tokens_in == tokens_out == 0 else math.nan
    return dollars


def _sum_known(costs: pd.Series) -> float:
    """A sum that includes a model without a price is unknown, not a smaller number."""
    return costs.sum() if costs.notna().all() else math.nan


def ledger_tables(
    ledgers: list[LedgerFile], prices: Mapping[str, Any] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-file totals and per role/task/model totals over all files.

    ``prices`` is the config's ``prices:`` (USD per million tokens, merged over the shipped
    table, :func:`mnemoflow.prices.price_table`); the cost column prices the tokens the
    endpoints processed (a response-cache hit has none) at those prices, so a price added after
    the run counts without re-running anything. Models without a price get no cost rather than a
    guess; local backends (offline, sentence_transformers) cost nothing.
    """
    table = price_table(prices)
    rows = []
    for ledger in ledgers:
        models = ledger.data["models"]
        for key, entry in ledger.data["by_role_task"].items():
            role, task = key.split("/", 1)
            counters = {name: entry.get(name, 0) for name in _LEDGER_COUNTERS}
            model = models.get(role, "?")
            cost = _cost(ledger, role, counters, table)
            rows.append({"ledger": ledger.label, "role": role, "task": task, "model": model,
                         **counters, "cost_usd": cost})  # fmt: skip
    columns = ["ledger", "role", "task", "model", *_LEDGER_COUNTERS, "cost_usd"]
    flat = pd.DataFrame(rows, columns=columns)
    sums: dict[str, Any] = {name: "sum" for name in _LEDGER_COUNTERS}
    sums["cost_usd"] = _sum_known
    per_file = flat.groupby("ledger", sort=True).agg(sums).reset_index()
    per_task = flat.groupby(["role", "task", "model"], sort=True).agg(sums).reset_index()
    for table_ in (per_file, per_task):
        calls = table_["calls"].where(table_["calls"] > 0)
        table_.insert(
            table_.columns.get_loc("cache_hits") + 1, "hit_rate", table_["cache_hits"] / calls
        )
    return per_file, per_task


#: A ledger's run, from its path: ``<benchmark>/<system>/<protocol>/step<k>/...``
#: (static QA, interactive and feedback steps alike).
_RUN_PATH = re.compile(r"(?:^|/)([^/]+)/([^/]+)/([^/]+)/step\d+/[^/]*(?:/[^/]*)?$")
#: Ledgers of a benchmark's shared work: the upper bound, environment generation.
_SHARED_PATH = re.compile(r"(?:^|/)([^/]+)/(upper_bound\.ledger\.json|environment/.*)$")


def run_of(path: str) -> tuple[str, str, str] | None:
    """(benchmark, system, protocol) of a run's ledger, from its path; ``(benchmark, "(shared)",
    "")`` for a benchmark's shared work; None for a path of neither shape."""
    path = path.replace(os.sep, "/")
    shared = _SHARED_PATH.search(path)
    if shared:
        return shared.group(1), "(shared)", ""
    found = _RUN_PATH.search(path)
    return (found.group(1), found.group(2), found.group(3)) if found else None


def run_entries(ledgers: list[LedgerFile]):
    """(ledger, (benchmark, system, protocol), role, role/task entry) of every ledger that
    belongs to a run (see :func:`run_of`)."""
    for ledger in ledgers:
        run = run_of(ledger.path or ledger.label)
        if run is not None:
            for key, entry in ledger.data["by_role_task"].items():
                yield ledger, run, key.split("/", 1)[0], entry


#: The metric whose correct answers a run is priced per: the first one a run has.
CORRECT_METRICS = ("accuracy", "j")


def run_costs(
    ledgers: list[LedgerFile], summary: pd.DataFrame, prices: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """One row per run (benchmark, system, protocol): its calls, tokens and dollars over all of
    its ledgers (every step and shard, ingest, answer and judge alike), its last-step accuracy,
    and dollars per correct answer.

    ``correct`` is the sum over the run's steps of the micro ``accuracy`` (else ``j``) times its
    ``n``: the answers judged correct that the run paid for. With ``repeats: N`` the ledgers are
    every repeat's, and so are the correct answers (the mean across seeds times the seeds, per
    step); ``accuracy`` stays the base seed's. A benchmark's shared work (the
    upper bound, environment generation) is a row of its own, system ``(shared)``. Columns:
    benchmark, system, protocol, calls, tokens_in, tokens_out, usd, truncated_calls, metric,
    accuracy, correct, usd_per_correct.
    """
    table = price_table(prices)
    rows = []
    for ledger, run, role, entry in run_entries(ledgers):
        counters = {name: entry.get(name, 0) for name in _LEDGER_COUNTERS}
        rows.append({"benchmark": run[0], "system": run[1], "protocol": run[2],
                     **counters, "usd": _cost(ledger, role, counters, table)})  # fmt: skip
    keys = ["benchmark", "system", "protocol"]
    columns = [*keys, "calls", "tokens_in", "tokens_out", "usd", "truncated_calls"]
    if not rows:
        return pd.DataFrame(columns=[*columns, "metric", "accuracy", "correct", "usd_per_correct"])
    flat = pd.DataFrame(rows)
    sums: dict[str, Any] = {name: "sum" for name in columns[3:]}
    sums["usd"] = _sum_known
    costs = flat.groupby(keys, sort=True).agg(sums).reset_index()[columns]
    metrics, accuracy, correct = [], [], []
    micro = summary[summary["aggregate"] == "micro"]
    by_run = {run: group for run, group in micro.groupby(keys)}
    means = summary[summary["aggregate"] == f"{SEEDS_MEAN}:micro"]
    seeds_of = {run: group for run, group in means.groupby(keys)}
    for row in costs.itertuples(index=False):
        mine = by_run.get((row.benchmark, row.system, row.protocol), micro.iloc[:0])
        metric = next((m for m in CORRECT_METRICS if (mine["metric"] == m).any()), None)
        if metric is None:
            metrics.append(""), accuracy.append(math.nan), correct.append(math.nan)
            continue
        scored = mine[mine["metric"] == metric]
        last = scored[scored["step"] == scored["step"].max()]
        metrics.append(metric)
        accuracy.append(float(last["value"].iloc[0]))
        seeds = seeds_of.get((row.benchmark, row.system, row.protocol), means.iloc[:0])
        seeds = seeds[seeds["metric"] == metric][["step", "value", "n"]]
        if not seeds.empty:  # each step's correct answers summed over the seeds
            both = scored.merge(seeds, on="step", suffixes=("", "_seeds"))
            correct.append(float((both["value_seeds"] * both["n_seeds"] * both["n"]).sum()))
            continue
        correct.append(float((scored["value"] * scored["n"]).sum()))
    costs["metric"], costs["accuracy"], costs["correct"] = metrics, accuracy, correct
    per = costs["usd"] / costs["correct"].where(costs["correct"] > 0)
    costs["usd_per_correct"] = per
    return costs


def provider_cache(ledgers: list[LedgerFile]) -> pd.DataFrame:
    """One row per run and role whose endpoint served prompt tokens from its own prompt cache:
    the prompt tokens it processed (``tokens_in``), those served from the provider's cache
    (``cached_in``, from ``usage.prompt_tokens_details.cached_tokens``, priced at
    ``cached_input``) and their share. Empty when no endpoint reported a cached token. Columns:
    benchmark, system, protocol, role, tokens_in, cached_in, cached_share."""
    rows = [
        {"benchmark": run[0], "system": run[1], "protocol": run[2], "role": role,
         "tokens_in": entry.get("tokens_in", 0), "cached_in": entry.get("cached_in", 0)}
        for _, run, role, entry in run_entries(ledgers)
    ]  # fmt: skip
    columns = ["benchmark", "system", "protocol", "role", "tokens_in", "cached_in"]
    flat = pd.DataFrame(rows, columns=columns)
    table = flat.groupby(columns[:4], sort=True)[["tokens_in", "cached_in"]].sum().reset_index()
    if not (table["cached_in"] > 0).any():
        return table.iloc[:0].assign(cached_share=[])
    table = table[table["tokens_in"] > 0].reset_index(drop=True)
    table["cached_share"] = table["cached_in"] / table["tokens_in"]
    return table


#: The role whose replies memory systems are built from (AWE events, AWI updates, facts, notes).
WRITER_ROLE = "memory_writer"


def writer_rates(ledgers: list[LedgerFile]) -> pd.DataFrame:
    """One row per run whose memory system called a writer: its ``memory_writer`` calls, the
    replies that never parsed after the gateway's re-asks (the update is skipped and memory stays
    as it was) and the events of parsed replies that could not be applied (AWE: an unknown id),
    each also as a share of the writer's calls. What a memory score does not show: a system
    whose writer fails often keeps a stale memory. Columns: benchmark, system, protocol,
    writer_calls, parse_failures, parse_failure_rate, dropped_events, dropped_per_call."""
    rows = [
        {"benchmark": run[0], "system": run[1], "protocol": run[2],
         "writer_calls": entry.get("calls", 0), "parse_failures": entry.get("parse_failures", 0),
         "dropped_events": entry.get("dropped_events", 0)}
        for _, run, role, entry in run_entries(ledgers)
        if role == WRITER_ROLE
    ]  # fmt: skip
    keys = ["benchmark", "system", "protocol"]
    counts = ["writer_calls", "parse_failures", "dropped_events"]
    if not rows:
        return pd.DataFrame(columns=[*keys, *counts, "parse_failure_rate", "dropped_per_call"])
    table = pd.DataFrame(rows).groupby(keys, sort=True)[counts].sum().reset_index()
    calls = table["writer_calls"].where(table["writer_calls"] > 0)
    table.insert(5, "parse_failure_rate", table["parse_failures"] / calls)
    table["dropped_per_call"] = table["dropped_events"] / calls
    return table
