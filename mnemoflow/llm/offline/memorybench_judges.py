"""Offline stand-ins for MemoryBench's judges: lexical overlap mapped onto each judge's scale.

Each handler reads the structured fields of its request and answers in the format the real
judge is asked for, so the same strict parsers read both. The numbers measure word overlap
(stemmed content words) with the checklist, criteria or reference, nothing more:

- HelloBench checklist: per point, the share of the point's content words found in the response,
  snapped to the nearest of 0 / .25 / .5 / .75 / 1;
- WritingBench critic: 1 + 9 x the share of the query's and criteria's content words the
  response uses, rounded;
- LimitGen: the aspect is "yes" when the limitation uses a word of the aspect or of one of its
  subtype names; the subtype is the one whose name and meaning share most words with it ("others"
  when none does); the rating is 1 + 4 x the share of the ground truth's words it contains;
- IdeaBench: overlap 1 + 9 x Dice of the two word sets; novelty ranks by the share of a
  candidate's words no other candidate uses, feasibility by the reverse;
- fusion (JuDGE, IdeaBench, JRE-L): 1 + 9 x the mean of the sub-metrics the caller put on 0..1.
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.lexical import stems
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.judge import overlap_recall

_LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Words every checklist question uses; they say nothing about the response.
_QUESTION_WORDS = frozenset(
    stems("response answer mention include provide describe use contain text whether clear")
)


def _recall(target: str, text: str, ignore: frozenset[str] = frozenset()) -> float:
    wanted = [w for w in stems(target) if w not in ignore]
    if not wanted:
        return 0.0
    said = set(stems(text))
    return sum(w in said for w in wanted) / len(wanted)


def _nearest_level(value: float) -> float:
    return min(_LEVELS, key=lambda level: (abs(level - value), level))


@handles("hellobench_checklist")
def hellobench_checklist(fields: dict[str, Any]) -> str:
    """Fields: instruction, response, checklist (point texts)."""
    entries = []
    for i, point in enumerate(fields["checklist"]):
        recall = _recall(point, fields["response"], _QUESTION_WORDS)
        entries.append(
            {
                "checklist_id": i,
                "reason": f"offline: {recall:.2f} of the point's words appear in the response",
                "evaluation_score": _nearest_level(recall),
            }
        )
    return json.dumps(entries)


@handles("writingbench_critic")
def writingbench_critic(fields: dict[str, Any]) -> str:
    """Fields: query, response, criteria (text)."""
    recall = _recall(f"{fields['query']} {fields['criteria']}", fields["response"])
    score = 1 + round(9 * recall)
    reason = f"offline: the response uses {recall:.2f} of the query and criteria words"
    return json.dumps({"score": score, "reason": reason})


@handles("limitgen_aspect")
def limitgen_aspect(fields: dict[str, Any]) -> str:
    """Fields: aspect, limitation, subtypes [(name, meaning)]."""
    names = " ".join([fields["aspect"], *(n for n, _ in fields["subtypes"] if n != "others")])
    return "yes" if set(stems(names)) & set(stems(fields["limitation"])) else "no"


@handles("limitgen_subtype")
def limitgen_subtype(fields: dict[str, Any]) -> str:
    said = set(stems(fields["limitation"]))
    best, best_shared = None, 0
    for number, (name, meaning) in enumerate(fields["subtypes"], 1):
        if name == "others":
            other = number
            continue
        shared = len(set(stems(f"{name} {meaning}")) & said)
        if shared > best_shared:
            best, best_shared = number, shared
    return str(best if best is not None else other)


@handles("limitgen_rating")
def limitgen_rating(fields: dict[str, Any]) -> str:
    """Fields: ground_truth, limitation."""
    recall = _recall(fields["ground_truth"], fields["limitation"])
    explanation = f"offline: {recall:.2f} of the ground truth's words appear"
    return json.dumps({"explanation": explanation, "rating": 1 + round(4 * recall)})


def _dice(a: str, b: str) -> float:
    x, y = set(stems(a)), set(stems(b))
    return 2 * len(x & y) / (len(x) + len(y)) if x or y else 0.0


@handles("ideabench_overlap")
def ideabench_overlap(fields: dict[str, Any]) -> str:
    """Fields: hypothesis, abstract."""
    dice = _dice(fields["hypothesis"], fields["abstract"])
    return json.dumps(
        {"rating": 1 + round(9 * dice), "explanation": f"offline: word-set Dice {dice:.2f}"}
    )


@handles("ideabench_ranking")
def ideabench_ranking(fields: dict[str, Any]) -> str:
    """Fields: abstract (candidate A), hypotheses (B, C, ...), criterion."""
    texts = [fields["abstract"], *fields["hypotheses"]]
    vocab = [set(stems(t)) for t in texts]
    novelty = []
    for i, words in enumerate(vocab):
        others = set().union(*(v for j, v in enumerate(vocab) if j != i))
        novelty.append(len(words - others) / len(words) if words else 0.0)
    sign = -1 if fields["criterion"] == "novelty" else 1
    order = sorted(range(len(texts)), key=lambda i: (sign * novelty[i], i))
    return "\n".join(
        f"{rank}. **Hypothesis {chr(ord('A') + i)}**: offline, {novelty[i]:.2f} of its words "
        "are its own"
        for rank, i in enumerate(order, 1)
    )


@handles("jrel_fusion", "ideabench_fusion", "judge_doc_fusion")
def fusion(fields: dict[str, Any]) -> str:
    """Fields: unit_scores {name: value on 0..1 or None}."""
    values = [v for v in fields["unit_scores"].values() if v is not None]
    mean = min(1.0, max(0.0, sum(values) / len(values))) if values else 0.0
    return str(1 + round(9 * mean))


# ---- MemoryBench's current judge protocol (scoring: judge;
# eval/memorybench/memorybench_judge_protocol.py) --

#: Option text of LoCoMo's category-5 "no answer" option.
NOT_MENTIONED = "not mentioned in the conversation"


def _option_map(reference: Any) -> dict[str, str] | None:
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError:
            return None
    if isinstance(reference, dict) and {"a", "b"} <= set(reference):
        return {k: str(reference[k]) for k in ("a", "b")}
    return None


def _evidence_text(evidence: Any) -> str:
    if isinstance(evidence, list):
        return " ".join(str(e.get("text", "")) if isinstance(e, dict) else str(e) for e in evidence)
    return str(evidence or "")


def _picked_option(response: str, options: dict[str, str]) -> str | None:
    said = response.strip().lower()
    for letter in ("a", "b"):
        if said in (letter, f"({letter})", f"{letter}.", f"({letter})."):
            return letter
    hits = {k: _recall(text, response) for k, text in options.items()}
    best = max(hits, key=lambda k: hits[k])
    return best if hits[best] >= 0.5 and hits[best] > min(hits.values()) else None


def _locomo_score(fields: dict[str, Any]) -> int:
    """Category 5: the correct option is the adversarial one iff at least half of its words are
    in the evidence, else "Not mentioned"; 10 if the reply picks it (letter or words), else 0.
    Other categories: 10 x the share of the reference's content words the reply holds."""
    response = str(fields.get("response") or "")
    options = _option_map(fields.get("reference"))
    if str(fields.get("category")) == "5" and options:
        evidence = _evidence_text(fields.get("evidence"))
        letters = {k for k, text in options.items() if text.strip().lower() == NOT_MENTIONED}
        adversarial = next((k for k in options if k not in letters), None)
        supported = adversarial and _recall(options[adversarial], evidence) >= 0.5
        correct = adversarial if supported else next(iter(letters), None)
        return 10 if correct and _picked_option(response, options) == correct else 0
    return round(10 * _recall(str(fields.get("reference", "")), response))


def _reference_rank(fields: dict[str, Any]) -> int:
    """The reference idea's position when the candidates are ordered by the share of their words
    no other candidate uses (novelty: most first; feasibility: least first)."""
    reply = ideabench_ranking(
        {"abstract": fields["reference"], "hypotheses": fields["hypotheses"],
         "criterion": fields["criteria"]}
    )  # fmt: skip
    return next(i for i, line in enumerate(reply.splitlines(), 1) if "Hypothesis A**" in line)


@handles("memorybench_llm_judge")
def memorybench_llm_judge(fields: dict[str, Any]) -> str:
    """Fields: kind (rubric | locomo | merge | idea_rating | idea_rank), response, reference,
    category, evidence, sub_scores, hypotheses, criteria. A rubric call scores 10 x the share of
    the reference's words in the response (characters for Chinese); a merge 10 x the mean of its
    sub-scores; LoCoMo as above; IdeaBench's rating and rank as its paper-protocol stand-ins."""
    kind = fields.get("kind")
    if kind == "idea_rating":
        dice = _dice(str(fields["response"]), str(fields["reference"]))
        return json.dumps(
            {"rating": 1 + round(9 * dice), "explanation": f"offline: Dice {dice:.2f}"}
        )
    if kind == "idea_rank":
        return json.dumps({"rank": _reference_rank(fields), "reason": "offline: own words"})
    if kind == "merge":
        subs = [float(s) for s in fields.get("sub_scores") or []]
        score = round(10 * sum(subs) / len(subs)) if subs else 0
    elif kind == "locomo":
        score = _locomo_score(fields)
    else:
        reference = str(fields.get("reference") or "")
        score = round(10 * overlap_recall(reference, str(fields.get("response") or "")))
    return json.dumps({"score": score, "reason": f"offline: {kind} overlap"})
