"""A judge panel: the same answers judged by several judges (prompts and/or models).

A headline accuracy depends on its judge: the same answers graded by two prompts can score far
apart. ``judge.panel`` names two or more judges, each ``{name, kind, model}``: ``kind`` a judge of
:data:`~mnemoflow.eval.benchmark_metric.JUDGES` (its prompt and parser), ``model`` a role binding
like ``models.judge`` (``endpoint: NAME`` included). Every panel judge is asked through
:func:`mnemoflow.eval.static_qa.judges.judge_answers`, exactly as the configured judge is, so a
prompt or parser change reaches the panel too; its verdicts go to ``panel_judgements.parquet`` (the
judgements schema plus ``panel_judge``), while ``judgements.parquet`` and the headline stay the
configured judge's. The configured judge takes part in the panel's comparisons as
:data:`CONFIGURED`, from its own judgements.

The false-positive probe (:mod:`mnemoflow.eval.static_qa.probes`) is judged here too, by every panel
judge and the configured one: wrong answers a sound judge rejects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mnemoflow.data.tables import CONFIGURED_JUDGE as CONFIGURED
from mnemoflow.data.tables import (
    JUDGEMENTS,
    NOT_VERDICTS,
    PANEL_JUDGEMENTS,
    PROBE_JUDGEMENTS,
    RUN_KEYS,
)
from mnemoflow.errors import ConfigError
from mnemoflow.eval.benchmark_metric import JUDGES
from mnemoflow.eval.static_qa.judges import judge_answers
from mnemoflow.eval.static_qa.probes import DEFAULT_SIZE, KINDS, build_probes, probe_answers
from mnemoflow.llm.addresses import public_bindings
from mnemoflow.llm.endpoints import bind_endpoints
from mnemoflow.llm.limits import JobLimits, endpoint_budgets, job_limits
from mnemoflow.llm.types import EndpointSpec

RUN_KEY_NAMES = [name for name, _ in RUN_KEYS]
#: A judgement's verdict columns (what the judge said), without the answer's keys.
_VERDICT_COLUMNS = [
    n for n in JUDGEMENTS.names if n not in {*RUN_KEY_NAMES, "question_id", "question_type"}
]


@dataclass(frozen=True)
class PanelJudge:
    """One judge of the panel: its name, its judge kind (prompt and parser) and its binding."""

    name: str
    kind: str
    model: dict[str, Any]


def public_panel(judges: list[PanelJudge]) -> list[PanelJudge]:
    """The panel as params, resource names and ledgers may carry it: every ``base_url``
    redacted (a job finds the real one in the config: ``jobs.context.config_bindings``)."""
    return [
        dataclasses.replace(j, model=public_bindings({"judge": j.model})["judge"]) for j in judges
    ]


def panel_of(
    judge_config: Mapping[str, Any] | None, endpoints: Mapping[str, Any] | None = None
) -> list[PanelJudge]:
    """The config's ``judge.panel`` with each ``model``'s ``endpoint: NAME`` resolved; [] when
    there is no panel. Bad entries fail in one line naming ``judge.panel[i]`` and the field."""
    entries = (judge_config or {}).get("panel") or []
    judges: list[PanelJudge] = []
    for i, entry in enumerate(entries):
        where = f"config judge.panel[{i}]"
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.name: a non-empty name, got {name!r}")
        if name == CONFIGURED or name in {j.name for j in judges}:
            taken = "the configured judge's name" if name == CONFIGURED else "used twice"
            raise ConfigError(f"{where}.name: {name!r} is {taken}")
        kind = entry.get("kind")
        if kind not in JUDGES:
            raise ConfigError(f"{where}.kind: one of {JUDGES.names()}, got {kind!r}")
        model = dict(entry.get("model") or {})
        try:
            bound = bind_endpoints({"judge": model}, endpoints)["judge"]
            EndpointSpec.from_config("judge", bound)
        except (ConfigError, ValueError) as exc:
            detail = str(exc).removeprefix("config models.judge").lstrip(": ")
            raise ConfigError(f"{where}.model: {detail}") from None
        judges.append(PanelJudge(name, kind, bound))
    if len(judges) == 1:
        raise ConfigError("config judge.panel: two or more judges, got one")
    return judges


def probe_settings(judge_config: Mapping[str, Any] | None) -> tuple[int, int]:
    """(size, seed) of the false-positive probe: ``judge.probe`` over the defaults (100 probes,
    the judge's seed)."""
    config = judge_config or {}
    probe = config.get("probe") or {}
    return int(probe.get("size", DEFAULT_SIZE)), int(probe.get("seed", config.get("seed", 0)))


def panel_budgets(models: Mapping[str, Any], judges: list[PanelJudge]) -> dict[str, int]:
    """The global budget of every endpoint a panel judge calls, as the run's own roles' are
    made (:func:`~mnemoflow.llm.limits.endpoint_budgets`), the run's roles on it included."""
    budgets: dict[str, int] = {}
    for judge in judges:
        for name, budget in endpoint_budgets({**models, "judge": judge.model}).items():
            budgets[name] = min(budget, budgets.get(name, budget))
    return budgets


def panel_limits(
    models: Mapping[str, Any], bindings: list[dict[str, Any]], endpoint_jobs: int
) -> JobLimits:
    """A panel job's share of the endpoints its judges call (``bindings``: each judge's
    binding): the judges ask one after the other, so an endpoint two judges share needs the
    larger share, not the sum."""
    resources: dict[str, int] = {}
    params: dict[str, dict[str, Any]] = {}
    for binding in bindings:
        limits = job_limits({**models, "judge": binding}, ("judge",), endpoint_jobs)
        for name, share in limits.resources.items():
            resources[name] = max(share, resources.get(name, 0))
        params.update(limits.params)
    return JobLimits(resources, params)


def _verdicts(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame.metric.isin(NOT_VERDICTS)]


async def judge_panel(
    judges: list[PanelJudge],
    gateways: Mapping[str, Any],
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    seed: int = 0,
) -> pd.DataFrame:
    """Every answer judged by every panel judge (``gateways``: name -> a gateway whose ``judge``
    role is that judge's binding), one ask each; rows in :data:`PANEL_JUDGEMENTS`."""
    frames = []
    for judge in judges:
        frame = await judge_answers(gateways[judge.name], judge.kind, questions, answers, 1, seed)
        frames.append(_verdicts(frame).assign(panel_judge=judge.name))
    if not frames:
        return pd.DataFrame(columns=PANEL_JUDGEMENTS.names)
    return pd.concat(frames, ignore_index=True)[PANEL_JUDGEMENTS.names]


def probe_set(
    questions: pd.DataFrame,
    sessions: pd.DataFrame,
    kinds: list[str],
    size: int,
    seed: int,
) -> pd.DataFrame:
    """The benchmark's probes as answers, built only from questions that every judge in
    ``kinds`` scores (LoCoMo's adversarial category has no judged gold)."""
    from mnemoflow.eval.static_qa.judges import judge_request_for

    def judged(question: dict[str, Any]) -> bool:
        return all(judge_request_for(kind, question, "") is not None for kind in kinds)

    benchmark = str(questions.benchmark.iloc[0]) if len(questions) else ""
    probes = build_probes(questions, sessions, size, seed, judged)
    return probe_answers(probes, questions, benchmark)


async def judge_probes(
    judges: list[PanelJudge], gateways: Mapping[str, Any], questions, probes, seed: int = 0
) -> pd.DataFrame:
    """Every probe judged by every judge (the configured one included, as a :class:`PanelJudge`
    named :data:`CONFIGURED`), through :func:`judge_panel`; rows in :data:`PROBE_JUDGEMENTS`.
    Each probe kind is judged as its own set of answers, so a question's three probes never
    meet in one call."""
    frames = []
    for kind in KINDS:
        subset = probes[probes.probe == kind]
        if subset.empty:
            continue
        answers = subset[[*RUN_KEY_NAMES, "question_id", "response"]]
        judged = await judge_panel(judges, gateways, questions, answers, seed)
        verdicts = judged[["question_id", "panel_judge", *_VERDICT_COLUMNS]]
        frames.append(subset.merge(verdicts, on="question_id", validate="one_to_many"))
    if not frames:
        return pd.DataFrame(columns=PROBE_JUDGEMENTS.names)
    return pd.concat(frames, ignore_index=True)[PROBE_JUDGEMENTS.names]
