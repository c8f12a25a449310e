"""The run summary: every run's scores in one table, and a readable Markdown rendering of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from mnemoflow.data.tables import SUMMARY
from mnemoflow.layout import REPEAT_FOLDER, RESULTS
from mnemoflow.report.denominators import denominator_table
from mnemoflow.report.evolution import evolution_table
from mnemoflow.report.feedback import feedback_markdown
from mnemoflow.report.generation import generation_markdown
from mnemoflow.report.headline import is_headline
from mnemoflow.report.interactive import (
    MIN_GAP,
    NOT_MEANINGFUL,
    baseline_table,
    memory_score_table,
    period_table,
)
from mnemoflow.report.seeds import seeds_table

#: summary.md's line on the verdicts the reference's own parse reads differently.
REFERENCE_NOTE = (
    "Verdicts the reference's own parse reads differently: {differ} of {read} "
    "(`value_reference` in judgements.parquet; docs/metrics.md)."
)
#: The count eval.static_qa.scoring writes per run (report reads tables, never eval).
REFERENCE_DISAGREEMENTS = "judge_reference_disagreements"


def summarize(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate score tables in a stable order (benchmark, system, protocol, step)."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=SUMMARY.names)
    frame = pd.concat(frames, ignore_index=True)[SUMMARY.names]
    return frame.sort_values(
        ["benchmark", "protocol", "system", "step", "metric", "aggregate"], kind="stable"
    ).reset_index(drop=True)


def _fmt(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.3f}"


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = [
        "| " + " | ".join(_fmt(v) if isinstance(v, float) else str(v) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


#: Headline columns of the summary table, in order, when a run has them: (metric, aggregate, label).
HEADLINE = (
    ("accuracy", "micro", "accuracy"),
    ("accuracy:all", "micro", "accuracy (all items)"),
    ("accuracy:unscored", "micro", "unscored"),
    ("accuracy", "ci95_low", "95% CI low"),
    ("accuracy", "ci95_high", "95% CI high"),
    ("accuracy", "macro", "task-avg acc"),
    ("accuracy", "abstention", "abstention acc"),
    ("j", "micro", "J"),
    ("j:all", "micro", "J (all items)"),
    ("j:unscored", "micro", "J unscored"),
    ("f1", "micro", "F1"),
    ("f1", "micro:no-adversarial", "F1 (cat 1-4)"),
    ("turn_evidence_recall", "micro", "evidence recall"),
    ("session_recall_all@5", "micro", "sess recall_all@5"),
    ("session_ndcg_any@5", "micro", "sess ndcg_any@5"),
    ("turn_recall_all@10", "micro", "turn recall_all@10"),
    ("write_failure_rate", "micro", "write fail"),
    ("read_failure_rate", "micro", "read fail"),
    ("utilization_failure_rate", "micro", "util fail"),
    ("retrieval_ms_p50", "micro", "retrieval p50 ms"),
    ("retrieval_ms_p95", "micro", "retrieval p95 ms"),
    ("retrieval_ms_cold", "micro", "first retrieval ms"),
    ("memory_kb", "micro", "snapshot KiB/episode"),
)
FOOTPRINT_NOTE = (
    "retrieval p50 / p95 and first retrieval: wall clock of this run on its machine (each "
    "episode's first retrieval opens the loaded memory), which moves with load: compare systems "
    "within a run, not runs; snapshot: the memory's size on disk as stored (the products' "
    "adapters store a gzip'd tar)."
)
DENOMINATOR_NOTE = (
    "{metric}: over the questions the judge scored; (all items): over every question, one whose "
    "judge reply never parsed counted wrong; unscored: how many that is."
)

#: The judged metric shown per question type and per step (the first one a benchmark has).
MAIN_METRICS = ("accuracy", "j", "f1")
#: Also shown per question type where a run has them: LoCoMo's official metric is F1 per category,
#: whatever the judged main metric (J) says.
PER_TYPE_ALSO = ("f1",)


#: Protocols whose steps are AMemGym periods (mnemoflow/protocols/interactive.py).
INTERACTIVE_PROTOCOLS = ("interactive", "interactive_replay")
BASELINE_NOTE = (
    "Random: the share of options holding the true state; upper bound: the agent's model without "
    "memory, told the true state; both over the same questions as accuracy."
)
MEMORY_SCORE_NOTE = (
    "Memory score = (overall - random) / (upper bound - random) per (user, period), "
    "then averaged (AMemGym's order)."
)
NOT_MEANINGFUL_NOTE = (
    f"{NOT_MEANINGFUL}: the periods where upper bound - random < {MIN_GAP} (the ratio magnifies "
    "a few questions) or some (user, period) has upper bound < random (its score's sign is "
    "reversed); compare accuracy with the random row and the `none` system there instead."
)


DENOMINATOR_PERIODS_NOTE = (
    "Means over periods at the last step. All items is AMemGym's accuracy (a reply that did not "
    "parse counted wrong); scored items leaves those out; unscored: how many replies that is."
)


def interactive_markdown(benchmark: str, bench: pd.DataFrame) -> list[str]:
    """One row per (system, protocol): each period's overall accuracy, then the mean over periods
    (AMemGym's reported number); the random baseline and upper bound per period; the memory score
    likewise (averaged per (user, period) first), with the periods where it is not meaningful."""
    parts: list[str] = []
    rows = bench.assign(benchmark=benchmark)
    accuracy = period_table(rows, "accuracy").drop(columns=["benchmark"], errors="ignore")
    if not accuracy.empty:
        parts += [f"## {benchmark}: overall accuracy per period", "", _markdown(accuracy), ""]
    both = denominator_table(bench, "accuracy", "mean_over_periods")
    if not both.empty:
        parts += [f"### {benchmark}: accuracy over the parsed replies and over all", ""]
        parts += [_markdown(both), "", DENOMINATOR_PERIODS_NOTE, ""]
    baselines = baseline_table(rows).drop(columns=["benchmark"], errors="ignore")
    if not baselines.empty:
        parts += [f"## {benchmark}: random and upper bound per period", "", _markdown(baselines)]
        parts += ["", BASELINE_NOTE, ""]
    memory = memory_score_table(rows).drop(columns=["benchmark"], errors="ignore")
    if not memory.empty:
        parts += [f"## {benchmark}: memory score per period", "", _markdown(memory), ""]
        parts += [MEMORY_SCORE_NOTE, ""]
        if NOT_MEANINGFUL in memory.columns:
            parts += [NOT_MEANINGFUL_NOTE, ""]
    evolution = evolution_table(bench.assign(benchmark=benchmark))
    if not evolution.empty:
        parts += [
            f"## {benchmark}: self-evolution (AMemGym Table 3)",
            "",
            _markdown(evolution.drop(columns=["benchmark"])),
            "",
            "On-policy means over periods; periods_evolved: periods in which the types section "
            "changed for at least one user; unparsed: rewrites whose reply never parsed.",
            "",
        ]
    return parts


def models_markdown(
    models: Mapping[str, Mapping[str, Any]] | None, structured: Mapping[str, str] | None = None
) -> list[str]:
    """The "Models" table: which backend and model played each role (public fields only), and
    with ``structured`` (role -> form, from the ledgers) the form of ``response_format`` each
    role's requests ended on."""
    if not models:
        return []
    columns = ["role", "backend", "model"]
    if any(spec.get("endpoint") for spec in models.values()):
        columns.append("endpoint")  # the named endpoint (config endpoints:) a role is bound to
    if any(spec.get("host") for spec in models.values()):
        columns.append("host")  # where its requests go (host:port, never a path or a key)
    rows = [[role, *(spec.get(key) or "" for key in columns[1:])] for role, spec in models.items()]
    if structured:
        columns.append("structured output")
        rows = [[*row, structured.get(row[0], "–")] for row in rows]
    table = pd.DataFrame(rows, columns=columns)
    lines = ["## Models", "", _markdown(table), ""]
    if structured:
        lines += [STRUCTURED_NOTE, ""]
    return lines


STRUCTURED_NOTE = (
    "Structured output: the form of `response_format` the role's requests ended on (json_schema, "
    "json_object, none: `structured_output: auto` steps down when the endpoint refuses one; "
    "docs/gateway.md); –: the role asked for none."
)


def versions_markdown(versions: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The "Data versions" table: per benchmark, the version id, the source file and checksum,
    the questions asked and dropped, and the errata overlay with its counts and source
    (``mnemoflow.data.errata.data_version``); then the loader's rules with their counts."""
    if not versions:
        return []
    table, rules = versions_table(versions)
    note = (
        "A run with errata is scored as released; `mnemoflow compare RESULTS --versions` scores "
        "it on the corrected version too. questions: those the runs ask (every denominator "
        "counts from them) and those the loader's rules dropped (docs/data.md)."
    )
    lines = ["## Data versions", "", _markdown(table), "", note, ""]
    if rules:
        lines += ["Loader rules (prepared/notes.txt):", "", *(f"- {r}" for r in rules), ""]
    return lines


def versions_table(versions: Mapping[str, Mapping[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """Per benchmark its data version (a row), and ``benchmark: rule`` lines of its loader's
    rules (``data_version.json`` ``records``, ``mnemoflow.data.registry.records_note``)."""
    rows, rules = [], []
    for benchmark, version in sorted(versions.items()):
        source = version.get("source") or {}
        errata = version.get("errata") or {}
        counts = ", ".join(f"{n} {a}" for a, n in (errata.get("counts") or {}).items())
        records = version.get("records") or {}
        rows.append(
            {
                "benchmark": benchmark,
                "version": f"`{version.get('id', 'unknown')}`",
                "source": source.get("file") or source.get("repo") or source.get("url") or "–",
                "questions": (
                    f"{records['questions']} ({records['questions_dropped']} dropped)"
                    if records
                    else "–"
                ),
                "errata": f"{errata['name']} ({counts})" if errata else "none (as released)",
                "errata source": errata.get("source") or "–",
            }
        )
        rules += [f"{benchmark}: {line}" for line in records.get("rules", [])]
    return pd.DataFrame(rows), rules


SEEDS_NOTE = (
    f"`repeats:` ran every run once per seed ({RESULTS}/ holds the base seed's, "
    f"{RESULTS}/{REPEAT_FOLDER.format(seed='{S}')} the others'). Base seed: the value the "
    "tables above show, with its 95 % interval over the questions; mean ± sd: over the seeds "
    "(sample sd), how much the score moves when the simulated users, the assistant and the "
    "memory writer sample again (an offline run's deterministic models give sd 0)."
)


def seeds_markdown(summary: pd.DataFrame) -> list[str]:
    """The "Across seeds" table (``repeats: N``): each headline score at the last step, the base
    seed's value and per-question interval beside its mean ± sd across seeds; nothing without."""
    table = seeds_table(summary, is_headline)
    if table.empty:
        return []
    return ["## Across seeds", "", _markdown(table), "", SEEDS_NOTE, ""]


def costs_markdown(costs: pd.DataFrame | None) -> list[str]:
    """The "Cost" table: per run, its last-step accuracy (or J), its dollars, dollars per correct
    answer, and the prompts cut to the context window (``summaries.run_costs``)."""
    if costs is None or costs.empty:
        return []
    table = pd.DataFrame(
        {
            "benchmark": costs["benchmark"],
            "system": costs["system"],
            "protocol": costs["protocol"],
            "score": [
                f"{metric} {value:.3f}" if metric else "–"
                for metric, value in zip(costs["metric"], costs["accuracy"], strict=True)
            ],
            "USD": [_usd(v) for v in costs["usd"]],
            "USD / correct": [_usd(v) for v in costs["usd_per_correct"]],
            "truncated prompts": costs["truncated_calls"].astype(int),
        }
    )
    return [
        "## Cost",
        "",
        _markdown(table),
        "",
        "USD: the tokens the endpoints processed for the run (every step; memory writing, "
        "answering, judging), at `prices:` over data/model_prices.yaml; local backends and "
        "response-cache hits cost nothing; – : a model without a price. USD / correct: per answer "
        "judged correct over all of the run's steps. Truncated prompts: cut to the context "
        "window (`overflow: truncate_oldest`); the ledgers name the items. With `repeats:`, "
        "USD and USD / correct cover every seed; score is the base seed's.",
        "",
    ]


def provider_cache_markdown(table: pd.DataFrame) -> list[str]:
    """The "Provider prompt cache" table (``summaries.provider_cache``): per run and role, the
    prompt tokens the endpoint served from its own prefix cache; nothing when none did."""
    if table.empty:
        return []
    shown = table.assign(cached_share=[f"{v:.1%}" for v in table["cached_share"]])
    return [
        "## Provider prompt cache",
        "",
        _markdown(shown),
        "",
        "tokens_in: prompt tokens the endpoints processed for the run and role (response-cache "
        "hits have none); cached_in: those the endpoint served from its own prompt cache "
        "(`usage.prompt_tokens_details.cached_tokens`), priced at `cached_input`. "
        "`models.<role>.prefix_dispatch` sends requests sharing a prompt prefix one after "
        "another so a server's prefix cache serves more of them (docs/gateway.md).",
        "",
    ]


def _usd(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.4f}"


def headline_markdown(tables: Mapping[str, pd.DataFrame] | None) -> list[str]:
    """The "Headline scores" section report.html opens with (``report.headline``'s tables: a
    run per row at its last step, each headline metric with its 95 % interval beside it)."""
    if not tables:
        return []
    parts = [
        "## Headline scores",
        "",
        "Each benchmark's headline scores, one row per run at its last step (the mean over "
        "questions with its 95 % interval; best run on top).",
        "",
    ]
    for benchmark, table in tables.items():
        steps = sorted(set(table["step"]))
        step = f"step {steps[0]}" if len(steps) == 1 else "last step of each run"
        shown = table.drop(columns=["system", "protocol", "step"])
        shown = shown.assign(n=shown["n"].map(lambda v: "–" if pd.isna(v) else str(int(v))))
        parts += [f"### {benchmark} ({step})", "", _markdown(shown), ""]
    return parts


def summary_markdown(
    summary: pd.DataFrame,
    generation: pd.DataFrame | None = None,
    models: Mapping[str, Mapping[str, Any]] | None = None,
    costs: pd.DataFrame | None = None,
    versions: Mapping[str, Mapping[str, Any]] | None = None,
    headline: Mapping[str, pd.DataFrame] | None = None,
    structured: Mapping[str, str] | None = None,
) -> str:
    """The headline tables report.html opens with (``headline``, when given), the run's models
    (role -> backend / model, when given), then per benchmark: headline metrics at the last
    step, per-type scores, and scores per step; then the cost of each run (``costs``, when
    given), and the data version each benchmark was read in (``versions``,
    ``prepared/data_version.json`` by benchmark). ``structured``: the models table's form of
    structured output per role (:func:`models_markdown`).

    Per-type tables: the main judged metric, then F1 where the benchmark has it (LoCoMo: J and F1).

    Failure rates are shares of the wrong answers: write (evidence never stored), read (stored,
    not retrieved), utilization (retrieved, answer still wrong).
    """
    opening = ["# mnemoflow summary", "", *headline_markdown(headline)]
    opening += models_markdown(models, structured)
    if summary.empty:
        parts = [*opening, "No scores.", *generation_markdown(generation), *costs_markdown(costs)]
        parts += versions_markdown(versions)
        return "\n".join(parts) + "\n"
    parts = opening
    interactive = summary["protocol"].isin(INTERACTIVE_PROTOCOLS)
    # learning-from-feedback protocols: every protocol but static QA and the interactive ones
    feedback = feedback_markdown(summary[~interactive])
    everything = summary
    for benchmark, bench in summary.groupby("benchmark", sort=True):
        if bench["protocol"].isin(INTERACTIVE_PROTOCOLS).any():
            parts += interactive_markdown(str(benchmark), bench)
            continue
        bench = bench[bench["protocol"] == "qa"]
        if bench.empty:
            continue
        last = bench[bench["step"] == bench.groupby("system")["step"].transform("max")]
        value = {
            (r["system"], r["metric"], r["aggregate"]): r["value"] for r in last.to_dict("records")
        }
        systems = sorted(last["system"].unique())
        columns = [c for c in HEADLINE if any((s, c[0], c[1]) in value for s in systems)]
        main = next((m for m in MAIN_METRICS if (bench["metric"] == m).any()), None)
        counted = last["metric"].isin([main, f"{main}:all"]) & (last["aggregate"] == "micro")
        scored = last.loc[counted, "n"]  # all questions, judged or not
        # no main metric: no answer was scored (e.g. every judge reply failed to parse)
        asked = f"{int(scored.max())} questions" if not scored.empty else "no answer scored"
        step = int(last["step"].max())
        table = pd.DataFrame(
            [[s, *(value.get((s, m, a), float("nan")) for m, a, _ in columns)] for s in systems],
            columns=["system", *(label for _, _, label in columns)],
        )
        for label in ("unscored", "J unscored"):  # counts, not shares
            if label in table.columns:
                table[label] = table[label].map(lambda v: "–" if pd.isna(v) else str(int(v)))
        parts += [f"## {benchmark}: last step ({step}), {asked}", "", _markdown(table), ""]
        for label in ("accuracy", "J"):
            if f"{label} (all items)" in table.columns:
                parts += [DENOMINATOR_NOTE.format(metric=label), ""]
        if "retrieval p50 ms" in table.columns or "snapshot KiB/episode" in table.columns:
            parts += [FOOTPRINT_NOTE, ""]
        if any(label.endswith(" fail") for label in table.columns):
            parts += ["Failure rates are shares of the wrong answers (not of all questions).", ""]
        if main is None:
            continue
        for metric in dict.fromkeys([main, *PER_TYPE_ALSO]):
            judged = last[(last["metric"] == metric) & last["aggregate"].str.startswith("type:")]
            if judged.empty:
                continue
            per_type = judged.pivot_table(index="system", columns="aggregate", values="value")
            per_type.columns = [c.removeprefix("type:") for c in per_type.columns]
            parts += [f"### {benchmark}: {metric} per question type", ""]
            parts += [_markdown(per_type.reset_index()), ""]
        steps = bench[(bench["metric"] == main) & (bench["aggregate"] == "micro")]
        if steps["step"].nunique() > 1:
            per_step = steps.pivot_table(index="system", columns="step", values="value")
            per_step.columns = [f"step {c}" for c in per_step.columns]
            parts += [f"### {benchmark}: {main} (micro) per step", ""]
            parts += [_markdown(per_step.reset_index()), ""]
    if feedback:
        parts += [feedback]
    parts += generation_markdown(generation)  # environments generated with a model
    failures = everything[everything["metric"] == "judge_parse_failures"]
    if not failures.empty and failures["value"].sum() > 0:
        count = int(failures["value"].sum())
        parts += [f"Judge replies that could not be parsed: {count}", ""]
    reference = everything[everything["metric"] == REFERENCE_DISAGREEMENTS]
    if not reference.empty:
        differ, read = int(reference["value"].sum()), int(reference["n"].sum())
        parts += [REFERENCE_NOTE.format(differ=differ, read=read), ""]
    parts += seeds_markdown(summary)
    parts += costs_markdown(costs)
    parts += versions_markdown(versions)
    return "\n".join(parts) + "\n"
