"""How much a run's numbers depend on its judge: the judge panel's tables for summary.md and the
report (per-judge accuracy beside the false-positive rate, Cohen's kappa per pair of judges, the
questions the judges disagree on, and the headline's spread across the panel).

Read from ``panel_judgements.parquet`` (the panel's verdicts), ``judgements.parquet`` (the
configured judge's, named ``configured``) and ``probe_judgements.parquet`` (the false-positive
probe). A verdict is a judgement's value read as correct (>= 0.5) or wrong; an unscored one
(value NaN) is left out of accuracy, agreement and acceptance, and counted.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mnemoflow.data.tables import CONFIGURED_JUDGE as CONFIGURED
from mnemoflow.data.tables import NOT_VERDICTS, empty, read_table
from mnemoflow.intervals import wilson_interval

#: A judge that accepts more than this share of the probe's wrong answers is flagged.
FLAG_RATE = 0.10
#: Disagreements summary.md lists at most (the report's panel_disagreements.tsv has them all).
MARKDOWN_DISAGREEMENTS = 20
_KEYS = ["benchmark", "system", "step", "question_id"]


def cohen_kappa(first, second) -> float:
    """Cohen's kappa of two judges' binary verdicts on the same answers: observed agreement
    corrected for the agreement their rates alone would give. NaN without answers, or when
    chance agreement is 1 (both judges gave one and the same verdict throughout: undefined)."""
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} and {len(b)} verdicts")
    if len(a) == 0:
        return math.nan
    observed = float(np.mean(a == b))
    pa, pb = float(a.mean()), float(b.mean())
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1:
        return math.nan
    return (observed - chance) / (1 - chance)


def verdicts(panel: pd.DataFrame, configured: pd.DataFrame) -> pd.DataFrame:
    """Every judge's verdict rows: the configured judge's (its judgements) and the panel's, with
    ``correct`` (1.0, 0.0, or NaN when unscored)."""
    own = configured[~configured.metric.isin(NOT_VERDICTS)].assign(panel_judge=CONFIGURED)
    rows = pd.concat([own, panel[~panel.metric.isin(NOT_VERDICTS)]], ignore_index=True)
    correct = np.where(rows.value.isna(), np.nan, (rows.value >= 0.5).astype(float))
    return rows.assign(correct=correct)


def _rate(accepted: int, n: int) -> tuple[float, float, float]:
    if n == 0:
        return math.nan, math.nan, math.nan
    low, high = wilson_interval(accepted, n)
    return accepted / n, low, high


def probe_rates(probes: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark and judge: probes judged, accepted, the acceptance rate with its 95 %
    Wilson interval, the rate per probe kind, unscored probes and whether the judge is flagged
    (accepts more than :data:`FLAG_RATE`)."""
    rows = []
    for (benchmark, judge), group in probes.groupby(["benchmark", "panel_judge"], sort=True):
        scored = group[group.value.notna()]
        accepted = int((scored.value >= 0.5).sum())
        rate, low, high = _rate(accepted, len(scored))
        row = {
            "benchmark": benchmark,
            "judge": judge,
            "probes": len(scored),
            "accepted": accepted,
            "false_positive_rate": rate,
            "ci95_low": low,
            "ci95_high": high,
        }
        for kind, part in scored.groupby("probe"):
            row[f"rate_{kind}"] = float((part.value >= 0.5).mean())
        row["unscored"] = int(group.value.isna().sum())
        row["flagged"] = bool(rate > FLAG_RATE) if not math.isnan(rate) else False
        rows.append(row)
    return pd.DataFrame(rows)


def accuracy_table(judged: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark, system and judge at the run's last step: accuracy over scored answers,
    unscored answers, and the judge's false-positive rate on the benchmark's probe beside it."""
    if judged.empty:
        return pd.DataFrame()
    last = judged.groupby(["benchmark", "system"]).step.transform("max")
    judged = judged[judged.step == last]
    rows = []
    for (benchmark, system, judge), group in judged.groupby(
        ["benchmark", "system", "panel_judge"], sort=True
    ):
        scored = group.correct.dropna()
        rows.append(
            {
                "benchmark": benchmark,
                "system": system,
                "judge": judge,
                "model/prompt": str(group.judge.iloc[0]),
                "step": int(group.step.iloc[0]),
                "n": len(scored),
                "unscored": int(group.correct.isna().sum()),
                "accuracy": float(scored.mean()) if len(scored) else math.nan,
            }
        )
    table = pd.DataFrame(rows)
    if not rates.empty:
        probe = rates[["benchmark", "judge", "false_positive_rate", "ci95_low", "ci95_high"]]
        table = table.merge(probe, on=["benchmark", "judge"], how="left")
        table["flagged"] = table.false_positive_rate > FLAG_RATE
    return table


def spread_table(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per run: the configured judge's accuracy (the headline's) and the panel's range."""
    if accuracy.empty:
        return pd.DataFrame()
    rows = []
    for (benchmark, system), group in accuracy.groupby(["benchmark", "system"], sort=True):
        values = group.accuracy.dropna()
        own = group[group.judge == CONFIGURED].accuracy
        rows.append(
            {
                "benchmark": benchmark,
                "system": system,
                "configured": float(own.iloc[0]) if len(own) else math.nan,
                "panel_min": float(values.min()) if len(values) else math.nan,
                "panel_max": float(values.max()) if len(values) else math.nan,
                "spread": float(values.max() - values.min()) if len(values) else math.nan,
                "judges": len(group),
            }
        )
    return pd.DataFrame(rows)


def _wide(judged: pd.DataFrame) -> pd.DataFrame:
    """One row per answer (every step), one column per judge: its verdict."""
    return judged.pivot_table(
        index=[*_KEYS, "question_type"], columns="panel_judge", values="correct", dropna=False
    )


def kappa_table(judged: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark and pair of judges, over every answer both scored (every system and step):
    answers, the share they agree on and Cohen's kappa."""
    rows = []
    for benchmark, group in judged.groupby("benchmark", sort=True):
        wide = _wide(group)
        for a, b in itertools.combinations(sorted(wide.columns), 2):
            both = wide[[a, b]].dropna()
            rows.append(
                {
                    "benchmark": benchmark,
                    "judge_a": a,
                    "judge_b": b,
                    "n": len(both),
                    "agreement": float((both[a] == both[b]).mean()) if len(both) else math.nan,
                    "kappa": cohen_kappa(both[a], both[b]),
                }
            )
    return pd.DataFrame(rows)


def disagreements(judged: pd.DataFrame) -> pd.DataFrame:
    """Every answer the judges do not all score alike (every system and step), one column per
    judge: 1 correct, 0 wrong, empty unscored."""
    if judged.empty:
        return pd.DataFrame()
    wide = _wide(judged)
    split = wide.nunique(axis=1, dropna=True) > 1
    return wide[split].reset_index().rename_axis(columns=None)


def panel_tables(
    panel: pd.DataFrame, configured: pd.DataFrame, probes: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """The panel's tables by name: accuracy, spread, kappa, disagreements, probe."""
    judged = verdicts(panel, configured)
    rates = probe_rates(probes) if not probes.empty else pd.DataFrame()
    accuracy = accuracy_table(judged, rates)
    return {
        "accuracy": accuracy,
        "spread": spread_table(accuracy),
        "kappa": kappa_table(judged),
        "disagreements": disagreements(judged),
        "probe": rates,
    }


#: The ledger counters the panel's cost table adds up per judge.
COST_COUNTERS = ("calls", "cache_hits", "tokens_in", "tokens_out", "parse_failures")


def panel_costs(paths: list[str]) -> pd.DataFrame:
    """Per judge, over the panel jobs' ledgers (``panel.ledgers.json``: one ledger per judge):
    calls, cache hits, tokens, parse failures and dollars (NaN when a model has no price).
    The configured judge's row is its probe only; its answers are in the run's own costs."""
    totals: dict[str, dict[str, float | None]] = {}
    for path in paths:
        try:
            judges = json.loads(Path(path).read_text(encoding="utf-8"))["judges"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a panel ledger file ({exc})") from None
        for name, ledger in sorted(judges.items()):
            entry = totals.setdefault(name, dict.fromkeys((*COST_COUNTERS, "usd"), 0.0))
            found = ledger["totals"]
            for counter in COST_COUNTERS:
                entry[counter] += found.get(counter, 0)
            usd = found.get("usd")
            entry["usd"] = None if usd is None or entry["usd"] is None else entry["usd"] + usd
    order = sorted(totals, key=lambda name: (name != CONFIGURED, name))
    rows = [{"judge": name, **totals[name]} for name in order]
    frame = pd.DataFrame(rows, columns=["judge", *COST_COUNTERS, "usd"])
    return frame.astype({c: int for c in COST_COUNTERS})


def read_panel(
    panel: list[str], configured: list[str], probes: list[str], ledgers: list[str] = ()
) -> dict:
    """:func:`panel_tables` of the files, and the judges' ``cost`` (empty: no panel)."""
    if not panel:
        return {}

    def read(paths, schema):
        frames = [read_table(p, schema) for p in paths]
        return pd.concat(frames, ignore_index=True) if frames else empty(schema)

    tables = panel_tables(
        read(panel, "panel_judgements"),
        read(configured, "judgements"),
        read(probes, "probe_judgements"),
    )
    return {**tables, "cost": panel_costs(list(ledgers))}


def flagged_judges(tables: dict[str, pd.DataFrame]) -> list[str]:
    """``benchmark: judge (rate)`` of every judge that accepts too many wrong answers."""
    probe = tables.get("probe", pd.DataFrame())
    if probe.empty:
        return []
    return [
        f"{r.benchmark}: {r.judge} accepts {r.false_positive_rate:.0%} of "
        f"{r.probes} wrong answers (95 % CI {r.ci95_low:.0%}-{r.ci95_high:.0%})"
        for r in probe[probe.flagged].itertuples()
    ]


def _cell(value) -> str:
    if isinstance(value, bool | np.bool_):
        return "**flagged**" if value else ""
    if isinstance(value, float | np.floating):
        return "–" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _markdown(frame: pd.DataFrame) -> list[str]:
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in frame.itertuples(False)]
    return [head, rule, *body]


def panel_markdown(tables: dict[str, pd.DataFrame]) -> list[str]:
    """summary.md's "Judge panel" section (no lines without a panel)."""
    if not tables or tables["accuracy"].empty:
        return []
    lines = [
        "## Judge panel",
        "",
        "The same answers judged by every judge of `judge.panel` and by the configured judge "
        "(`configured`, whose verdicts are the headline's), at each run's last step; the "
        "false-positive rate is the share of the probe's wrong answers (a swapped key fact, a "
        f"vague answer, a wrong abstention) the judge accepts, with its 95 % interval; over "
        f"{FLAG_RATE:.0%} the judge is flagged.",
        "",
    ]
    flagged = flagged_judges(tables)
    if flagged:
        lines += [f"**Lenient judge**: {text}." for text in flagged] + [""]
    lines += [*_markdown(tables["accuracy"]), ""]
    lines += ["Headline (configured judge) and its spread across the panel:", ""]
    lines += [*_markdown(tables["spread"]), ""]
    if not tables["kappa"].empty:
        lines += ["Agreement per pair of judges (every step; Cohen's kappa):", ""]
        lines += [*_markdown(tables["kappa"]), ""]
    if not tables["probe"].empty:
        lines += ["False-positive probe per judge:", "", *_markdown(tables["probe"]), ""]
    cost = tables.get("cost", pd.DataFrame())
    if not cost.empty:
        lines += [
            "Calls per judge (the panel's and the probe's jobs; USD at the run's prices):",
            "",
        ]
        lines += [*_markdown(cost), ""]
    split = tables["disagreements"]
    if split.empty:
        lines += ["The judges agree on every answer.", ""]
    else:
        shown = split.head(MARKDOWN_DISAGREEMENTS)
        lines += [
            f"Answers the judges disagree on: {len(split)} (1 correct, 0 wrong"
            + (
                f"; the first {len(shown)}, all in report/panel_disagreements.tsv"
                if len(shown) < len(split)
                else ""
            )
            + "):",
            "",
            *_markdown(shown),
            "",
        ]
    return lines
