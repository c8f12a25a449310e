"""The offline stand-ins for MemoryBench's judges: worked overlaps, each judge's scale, and replies
that the strict parsers accept (so an offline run of any set completes)."""

from __future__ import annotations

import json

import pytest

from mnemoflow.eval.memorybench import checklist_judge, ideabench, limitgen, writingbench_critic
from mnemoflow.eval.memorybench.fusion import parse_fused
from mnemoflow.llm.offline import HANDLERS, _load_handlers

_load_handlers()


def handler(task):
    return HANDLERS[task]


def test_checklist_levels_from_point_word_recall():
    # point 0 "the sea": content words {sea} all present -> 1
    # point 1 "rhyme and meter": {rhyme, meter}, one present -> 0.5
    # point 2 "a happy ending": {happy, ending} none present -> 0
    # point 3 "waves, gulls, sand and salt": 1 of 4 -> 0.25
    fields = {
        "instruction": "Write a poem",
        "response": "The sea rolls with rhyme; waves break.",
        "checklist": [
            "Does the response describe the sea?",
            "Does it use rhyme and meter?",
            "Does it have a happy ending?",
            "Does it mention waves, gulls, sand and salt?",
        ],
    }
    reply = handler("hellobench_checklist")(fields)
    assert checklist_judge.parser(4)(reply) == [1.0, 0.5, 0.0, 0.25]


def test_critic_maps_recall_onto_one_to_ten():
    fields = {"query": "tax memo", "criteria": "clear tax advice", "response": "A tax memo."}
    # words {tax, memo, clear, tax, advice}: tax, memo, tax present -> 3/5 -> 1 + round(5.4) = 6
    assert writingbench_critic.parse_critic(handler("writingbench_critic")(fields)) == 6
    empty = {**fields, "response": "Hello."}
    assert writingbench_critic.parse_critic(handler("writingbench_critic")(empty)) == 1


def test_limitgen_heuristics_answer_in_the_judge_formats():
    subtypes = limitgen.SUBTYPES["experimental design"]
    ask = {"aspect": "experimental design", "subtypes": subtypes}
    ablation = {**ask, "limitation": "There is no ablation of the encoder."}
    assert limitgen.parse_yes_no(handler("limitgen_aspect")(ablation)) is True
    prose = {**ask, "limitation": "The writing is hard to follow."}
    assert limitgen.parse_yes_no(handler("limitgen_aspect")(prose)) is False
    assert limitgen.subtype_parser(5)(handler("limitgen_subtype")(ablation)) == 4
    assert limitgen.subtype_parser(5)(handler("limitgen_subtype")(prose)) == 5  # others
    rating = {"ground_truth": "no ablation of the encoder", "limitation": "no ablation at all"}
    # ground truth words {ablation, encoder}: 1 of 2 -> 1 + round(2.0) = 3
    assert limitgen.parse_rating(handler("limitgen_rating")(rating)) == 3


def test_ideabench_heuristics():
    overlap = {"hypothesis": "gene x regulates protein", "abstract": "gene x binds protein"}
    # sets {gene, x, regul, protein} and {gene, x, bind, protein}: Dice 2*3/8 = .75 -> 1+7 = 8
    assert ideabench.parse_overlap(handler("ideabench_overlap")(overlap)) == 8
    ranking = {"abstract": "gene protein", "hypotheses": ["gene protein liver", "mars"]}
    for criterion in ("novelty", "feasibility"):
        reply = handler("ideabench_ranking")({**ranking, "criterion": criterion})
        rank = ideabench.ranking_parser(2)(reply)
        # own-word shares: A 0, B 1/3, C 1 -> novelty order C, B, A; feasibility A, B, C
        assert rank == (3 if criterion == "novelty" else 1)


@pytest.mark.parametrize(
    ("units", "expected"),
    [({"a": 1.0, "b": 0.5}, 8), ({"a": 0.0}, 1), ({"a": 1.0, "b": None}, 10), ({}, 1)],
)
def test_fusion_maps_the_mean_unit_score_onto_one_to_ten(units, expected):
    # mean .75 -> 1 + round(6.75) = 8; None sub-metrics are left out
    for task in ("jrel_fusion", "ideabench_fusion", "judge_doc_fusion"):
        assert parse_fused(handler(task)({"unit_scores": units})) == expected


def test_every_new_judge_task_has_an_offline_handler():
    tasks = {
        checklist_judge.TASK,
        writingbench_critic.TASK,
        limitgen.ASPECT_TASK,
        limitgen.SUBTYPE_TASK,
        limitgen.RATING_TASK,
        ideabench.OVERLAP_TASK,
        ideabench.RANKING_TASK,
        ideabench.FUSION_TASK,
        "jrel_fusion",
        "judge_doc_fusion",
    }
    assert sorted(tasks - set(HANDLERS)) == []
    reply = handler("limitgen_rating")({"ground_truth": "", "limitation": "x"})
    assert json.loads(reply)["rating"] == 1
