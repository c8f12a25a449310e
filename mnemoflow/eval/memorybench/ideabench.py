"""IdeaBench (research hypotheses from abstracts): best-of-3 by BERTScore-F1, an LLM overlap
rating, novelty and feasibility ranks against the gold abstract, then one fusion call to 1-10.

Reference (MemoryBench ``src/dataset/IdeaBench.py``; judge temperature 0, max 1024 tokens):

- the response is split on ``---IDEA-SEPARATOR---`` into non-empty hypotheses, padded with "NULL"
  to 3; each is BERTScored (deberta-xlarge-mnli) against ``info["abstract"]``; the best F1 is
  ``bert_score`` and its hypothesis goes on;
- ``llm_rating_score``: the judge rates the overlap of the best hypothesis with the abstract,
  JSON ``{"rating": 1-10, "explanation"}`` (one user message);
- ``llm_novelty_ranking_score`` / ``llm_feasibility_ranking_score``: the judge ranks
  "Hypothesis A" (the gold abstract) and B, C, D (the hypotheses) as a numbered list of
  ``**Hypothesis X**`` lines; the score is (rank of A - 1) / number of hypotheses;
- the fusion prompt shows the input, the best hypothesis, the abstract and the four metrics.

Differences (docs/metrics.md): a ranking must name every candidate exactly once, and a rating
must be an integer 1-10, or the reply is re-asked; a sub-judgement that still fails is shown to
the fusion call as "N/A" and listed in ``details["sub_parse_failures"]`` (the reference raises
when A is missing, scores an empty ranking -1/3, and shows "N/A" only for the rating). The fusion
call is made once (:mod:`fusion`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from mnemoflow.eval.memorybench.fusion import FusedScorer, fusion_request, number
from mnemoflow.eval.memorybench.judged_score import json_rating
from mnemoflow.eval.metrics.bertscore import BertScoreModel, bertscore
from mnemoflow.llm.types import ChatRequest, UnparseableReply, prompt_request

DATASET = "IdeaBench"
PROMPT_VERSION = "ideabench-v1"
OVERLAP_TASK = "ideabench_overlap"
RANKING_TASK = "ideabench_ranking"
FUSION_TASK = "ideabench_fusion"
SEPARATOR = "---IDEA-SEPARATOR---"
MIN_HYPOTHESES = 3

OVERLAP_PROMPT = (
    "You are an expert reader of scientific work. Rate how much the ideas of the "
    "hypothesis below overlap with the ideas of the paper abstract below, from 1 (little "
    "or no overlap) to 10 (the same ideas, or nearly). Read both carefully and explain "
    "your rating briefly.\n"
    "\n"
    'Answer with a JSON object with two keys: "rating" (an integer 1-10) and '
    '"explanation" (a string).\n'
    "\n"
    "Hypothesis:\n"
    "{hypothesis}\n"
    "\n"
    "Abstract:\n"
    "{abstract}\n"
)
RANKING_PROMPT = (
    "You review research ideas. Rank the hypotheses below by their {criterion}, the one "
    "with the highest {criterion} first. Answer with a numbered list that names every "
    "hypothesis once, best first, each line like:\n"
    "1. **Hypothesis C**: short rationale\n"
    "2. **Hypothesis A**: short rationale\n"
    "\n"
    "The hypotheses:\n"
    "\n"
    "{candidates}"
)
FUSION_PROMPT = (
    "You are an experienced scientist. Judge the overall quality of a research idea that "
    "a model generated from background abstracts, using the context, the ground-truth "
    "idea and metrics computed beforehand.\n"
    "\n"
    "Context given to the model:\n"
    "{context}\n"
    "\n"
    "Generated research idea:\n"
    "{idea}\n"
    "\n"
    "Ground-truth research idea (abstract of the real paper):\n"
    "{gold}\n"
    "\n"
    "Metrics comparing the generated idea with the ground truth:\n"
    "1. bert_score: {bert_score} (semantic similarity, 0.00 none to 1.00 the same "
    "meaning)\n"
    "2. llm_rating_score: {rating} (idea overlap rated by a model, 1 minimal to 10 "
    "near-perfect)\n"
    "3. llm_novelty_ranking_score: {novelty} (0.00 to 1.00, from ranking the generated "
    "ideas with the ground truth by novelty: near 0 the generated idea is much less "
    "novel than the ground truth, near 0.5 comparable, near 1 much more novel)\n"
    "4. llm_feasibility_ranking_score: {feasibility} (the same ranking by feasibility)\n"
    "\n"
    "Considering the context, the idea, the ground truth and all the metrics, give the "
    "generated idea one integer score from 1 to 10: 1 is very poor (incoherent, "
    "irrelevant, wrong), 10 is excellent (coherent, insightful, novel, feasible, "
    "grounded in the background, as good as an expert's idea).\n"
    "\n"
    "Your response should be only a single integer."
)

_RANKED = re.compile(r"\*\*\s*Hypothesis\s+([A-Z])\s*\*\*")


def hypotheses_of(response: str) -> list[str]:
    found = [h.strip() for h in response.split(SEPARATOR) if h.strip()]
    return found + ["NULL"] * (MIN_HYPOTHESES - len(found))


def letters(count: int) -> list[str]:
    """Candidate letters: A is the gold abstract, then one per hypothesis."""
    return [chr(ord("A") + i) for i in range(count + 1)]


def parse_overlap(text: str) -> int:
    return json_rating(text, 10)


def ranking_parser(count: int):
    """Reply -> rank (1-based) of the gold abstract "A" among ``count`` + 1 candidates."""
    expected = letters(count)

    def parse(text: str) -> int:
        order = _RANKED.findall(text)
        if sorted(order) != expected:
            raise UnparseableReply(f"ranking {order} does not name {expected} once each")
        return order.index("A") + 1

    return parse


def overlap_request(hypothesis: str, abstract: str) -> ChatRequest:
    prompt = OVERLAP_PROMPT.format(hypothesis=hypothesis, abstract=abstract)
    fields = {"hypothesis": hypothesis, "abstract": abstract}
    return prompt_request("judge", OVERLAP_TASK, prompt, fields)


def ranking_request(hypotheses: list[str], abstract: str, criterion: str) -> ChatRequest:
    names = letters(len(hypotheses))
    candidates = "\n\n".join(
        f"**Hypothesis {name}**:\n{text}"
        for name, text in zip(names, [abstract, *hypotheses], strict=True)
    )
    prompt = RANKING_PROMPT.format(criterion=criterion, candidates=candidates)
    fields = {"abstract": abstract, "hypotheses": hypotheses, "criterion": criterion}
    return prompt_request("judge", RANKING_TASK, prompt, fields)


async def sub_metrics(
    gateway, response: str, abstract: str, model: BertScoreModel | None = None
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(metrics, failed sub-judgements, raw replies)."""
    hypotheses = hypotheses_of(response)
    scores = await asyncio.to_thread(bertscore, hypotheses, [abstract] * len(hypotheses), model)
    f1s = [f1 for _, _, f1 in scores]
    best = f1s.index(max(f1s))
    failures, raw = [], {}
    criteria = ("novelty", "feasibility")
    overlap, *rankings = await asyncio.gather(
        gateway.chat(overlap_request(hypotheses[best], abstract), parse=parse_overlap),
        *(
            gateway.chat(
                ranking_request(hypotheses, abstract, criterion),
                parse=ranking_parser(len(hypotheses)),
            )
            for criterion in criteria
        ),
    )
    raw["overlap"] = overlap.raw_replies
    if not overlap.parse_ok:
        failures.append("llm_rating_score")
    ranks = {}
    for criterion, reply in zip(criteria, rankings, strict=True):
        raw[criterion] = reply.raw_replies
        name = f"llm_{criterion}_ranking_score"
        if reply.parse_ok:
            ranks[name] = (reply.parsed - 1) / len(hypotheses)
        else:
            ranks[name] = None
            failures.append(name)
    metrics = {
        "generated_hypotheses": hypotheses,
        "best_hypothesis_by_bertf1": hypotheses[best],
        "bert_score": f1s[best],
        "llm_rating_score": overlap.parsed if overlap.parse_ok else None,
        **ranks,
    }
    return metrics, failures, raw


def fusion_prompt(context: str, abstract: str, metrics: dict[str, Any]) -> str:
    rating = metrics["llm_rating_score"]
    return FUSION_PROMPT.format(
        context=context,
        idea=metrics["best_hypothesis_by_bertf1"],
        gold=abstract,
        bert_score=number(metrics["bert_score"]),
        rating="N/A" if rating is None else str(rating),
        novelty=number(metrics["llm_novelty_ranking_score"]),
        feasibility=number(metrics["llm_feasibility_ranking_score"]),
    )


async def _ask(gateway, context: str, response: str, abstract: str, model):
    metrics, failures, raw = await sub_metrics(gateway, response, abstract, model)
    rating = metrics["llm_rating_score"]
    units = {
        "bert_score": metrics["bert_score"],
        "llm_rating_score": None if rating is None else (rating - 1) / 9,
        "llm_novelty_ranking_score": metrics["llm_novelty_ranking_score"],
        "llm_feasibility_ranking_score": metrics["llm_feasibility_ranking_score"],
    }
    request = fusion_request(FUSION_TASK, fusion_prompt(context, abstract, metrics), units)
    details = {
        "sub_metrics": metrics,
        "sub_parse_failures": failures,
        "sub_raw_replies": raw,
    }
    return request, details


#: ``ideabench_score(gateway, test_idx, context, response, info, store, model=None)``.
ideabench_score = FusedScorer(DATASET, PROMPT_VERSION, "abstract", _ask)
