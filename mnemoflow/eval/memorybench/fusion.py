"""The one fusion call of MemoryBench's multi-metric datasets (JuDGE, IdeaBench, JRE-L), asked once.

The reference turns each item's sub-metrics into ONE 1-10 score by a judge call (system "You are
a helpful assistant.", temperature 0, a prompt that lists the input, the output, the gold text
and every sub-metric and ends "Your response should be only a single integer."), but only inside
``summary_results``, and it asks again at every summary, so its numbers drift between summaries
(memorybench.md 5.5). Here the call is made once per (dataset, test_idx, response) and setting
(prompt version, judge binding, BERTScore model: :func:`fusion_setting`) and stored with its raw
reply in a :class:`FusionStore`; every later summary under the same setting reads the stored value
and makes no model call (another judge, or a revised prompt, asks again). A reply that is not a
single integer 1-10 is re-asked, then stored as a counted failure (``value`` None), never as
the reference's 0.

Offline, the fusion handler maps the sub-metrics the caller lists in ``fields["unit_scores"]``
(each already on 0..1) to ``1 + round(9 * mean)``: a transparent stand-in, not a model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.eval.memorybench.judged_score import JudgedScore, raw_of, single_integer
from mnemoflow.eval.metrics.bertscore import BertScoreModel
from mnemoflow.llm.types import ChatRequest, prompt_request

SYSTEM = "You are a helpful assistant."
METRIC = "llm_as_judge_score"
REFERENCE_SAMPLING = {"temperature": 0.0, "max_tokens": 1024, "top_p": 0.1}
ENDING = "Your response should be only a single integer."


def parse_fused(text: str) -> int:
    return single_integer(text, 1, 10)


def number(value: float | None, digits: int = 4) -> str:
    """A sub-metric as the prompt shows it: fixed decimals, or "N/A" when it has no value."""
    return "N/A" if value is None else f"{value:.{digits}f}"


def item_key(dataset: str, test_idx: Any, response: str) -> str:
    digest = hashlib.sha256(response.encode("utf-8")).hexdigest()[:16]
    return f"{dataset}/{test_idx}/{digest}"


def fusion_setting(gateway, prompt_version: str, bertscore_model: dict[str, Any]) -> dict[str, Any]:
    """What a fused score depends on besides the item: the prompt version, the judge's binding
    (model, sampling) and the BERTScore model behind the sub-metrics. A stored score is reused only
    under the same setting, so a rerun with another judge or after a prompt fix asks again."""
    describe = getattr(gateway, "describe", None)
    judge = describe().get("judge") if callable(describe) else None
    setting = {"prompt_version": prompt_version, "judge": judge, "bertscore_model": bertscore_model}
    return json.loads(json.dumps(setting, sort_keys=True, default=str))  # as stored in JSON


class FusionStore:
    """Fused scores by item key, persisted as one JSON file (written atomically on each put);
    each record keeps the :func:`fusion_setting` it was asked under."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.records: dict[str, dict[str, Any]] = {}
        if self.path and self.path.is_file():
            self.records = json.loads(self.path.read_text(encoding="utf-8"))

    def get(self, key: str, setting: dict[str, Any] | None = None) -> JudgedScore | None:
        """The stored score of ``key``; None when there is none, or (``setting`` given) when it
        was asked under another setting (a stale value is never returned)."""
        record = self.records.get(key)
        if not record or (setting is not None and record.get("setting") != setting):
            return None
        return JudgedScore(**{k: v for k, v in record.items() if k != "setting"})

    def put(self, key: str, score: JudgedScore, setting: dict[str, Any] | None = None) -> None:
        self.records[key] = {
            "setting": setting,
            "metric": score.metric,
            "value": score.value,
            "raw_reply": score.raw_reply,
            "parse_ok": score.parse_ok,
            "prompt_version": score.prompt_version,
            "details": score.details,
        }
        if self.path:
            from mnemoflow.data.tables import write_atomic_text

            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic_text(self.path, json.dumps(self.records, ensure_ascii=False, indent=1))


def fusion_request(task: str, prompt: str, unit_scores: dict[str, float | None]) -> ChatRequest:
    return prompt_request("judge", task, prompt, {"unit_scores": unit_scores}, system=SYSTEM)


async def fuse(
    gateway,
    request: ChatRequest,
    prompt_version: str,
    key: str,
    store: FusionStore,
    details: dict[str, Any],
    setting: dict[str, Any] | None = None,
) -> JudgedScore:
    """The stored fused score for ``key`` (under ``setting``), or one fusion call whose result is
    stored."""
    stored = store.get(key, setting)
    if stored is not None:
        return stored
    reply = await gateway.chat(request, parse=parse_fused)
    score = JudgedScore(
        metric=METRIC,
        value=float(reply.parsed) if reply.parse_ok else None,
        raw_reply=raw_of(reply.raw_replies),
        parse_ok=reply.parse_ok,
        prompt_version=prompt_version,
        details=details,
    )
    store.put(key, score, setting)
    return score


async def fused_item_score(
    gateway,
    dataset: str,
    prompt_version: str,
    test_idx: Any,
    response: str,
    info: dict[str, Any],
    gold_field: str,
    store: FusionStore,
    model: BertScoreModel | None,
    ask: Callable[[str], Awaitable[tuple[ChatRequest, dict[str, Any]]]],
) -> JudgedScore:
    """One multi-metric item's fused score: the stored one when the item was fused under the same
    setting, else ``ask(gold)`` (the dataset's sub-metrics against ``info[gold_field]`` -> its
    fusion request and details) and one fusion call. The sub-metrics are computed only when no
    stored score serves; the details gain the BERTScore model they were computed with."""
    if gold_field not in info:
        raise ValueError(f"{dataset} item: info has no {gold_field!r}")
    key = item_key(dataset, test_idx, response)
    bert_model = (model or BertScoreModel()).describe()
    setting = fusion_setting(gateway, prompt_version, bert_model)
    stored = store.get(key, setting)
    if stored is not None:
        return stored
    request, details = await ask(str(info[gold_field]))
    details = {**details, "bertscore_model": bert_model}
    return await fuse(gateway, request, prompt_version, key, store, details, setting)


#: ``ask(gateway, source, response, gold, model)``: a dataset's sub-metrics of ``response`` against
#: ``gold`` -> (its fusion request, the details stored with the fused score).
Ask = Callable[..., Awaitable[tuple[ChatRequest, dict[str, Any]]]]


@dataclass
class FusedScorer:
    """A multi-metric dataset's fused item score, called as ``scorer(gateway, test_idx, source,
    response, info, store, model=None)``: :func:`fused_item_score` with the dataset's ``ask``
    against ``info[gold_field]``."""

    dataset: str
    prompt_version: str
    gold_field: str
    ask: Ask

    async def __call__(
        self,
        gateway,
        test_idx: Any,
        source: str,
        response: str,
        info: dict[str, Any],
        store: FusionStore,
        model: BertScoreModel | None = None,
    ) -> JudgedScore:
        async def ask(gold: str):
            return await self.ask(gateway, source, response, gold, model)

        return await fused_item_score(
            gateway, self.dataset, self.prompt_version, test_idx, response, info,
            self.gold_field, store, model, ask,
        )  # fmt: skip


def computed_ask(task: str, sub_metrics: Callable, prompt: Callable, shown: tuple[str, ...]) -> Ask:
    """The ``ask`` of a dataset whose sub-metrics are computed here, without a model call:
    ``sub_metrics(response, gold, model)`` off the event loop (CPU-bound: tokenizers, METEOR,
    BERTScore; other items keep calling meanwhile), the request ``prompt(source, response, gold,
    metrics)`` with the ``shown`` sub-metrics as the offline handler's unit scores."""

    async def ask(gateway, source: str, response: str, gold: str, model: BertScoreModel | None):
        metrics = await asyncio.to_thread(sub_metrics, response, gold, model)
        units = {name: metrics[name] for name in shown}
        return fusion_request(task, prompt(source, response, gold, metrics), units), {
            "sub_metrics": metrics
        }

    return ask
