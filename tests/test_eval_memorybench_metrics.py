"""MemoryBench's per-item metrics, each pinned by worked examples (numbers written out)."""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.data.validate import DataError
from mnemoflow.errors import ConfigError
from mnemoflow.eval.memorybench.dialsim_accuracy import exact_match, parse_verdict
from mnemoflow.eval.memorybench.memorybench_locomo_f1 import memorybench_locomo_f1
from mnemoflow.eval.memorybench.memorybench_metrics import (
    ItemScore,
    check_supported,
    evaluate_item,
    item_value,
)
from mnemoflow.eval.memorybench.nfcats_judge import parse_score
from mnemoflow.llm.gateway import Gateway
from mnemoflow.llm.offline.memorybench import nfcats_offline_score
from mnemoflow.llm.types import UnparseableReply
from mnemoflow.testing.openai_server import OpenAITestServer

NM = "Not mentioned in the conversation"


def run(coro):
    return asyncio.run(coro)


async def _score(question, response, gateway):
    try:
        return await evaluate_item(question, response, gateway)
    finally:
        await gateway.aclose()
        gateway.close()


def offline(tmp_path):
    return Gateway.from_config({}, tmp_path / "cache.sqlite")


def scripted(tmp_path, server, **params):
    judge = {"base_url": server.base_url, "model": "judge-m", **params}
    return Gateway.from_config({"judge": judge}, tmp_path / "cache.sqlite")


class Script:
    """Judge replies in turn (the last one repeats)."""

    def __init__(self, *replies):
        self.replies, self.calls = list(replies), 0

    def __call__(self, body):
        self.calls += 1
        return self.replies[min(self.calls - 1, len(self.replies) - 1)]


def q(dataset, info, question="Q?", qid=None):
    return {
        "dataset": dataset,
        "question_id": qid or f"{dataset}:0",
        "question": question,
        "meta": json.dumps({"info": info}),
    }


# ------------------------------------------------------------------ LoCoMo F1 (MemoryBench)


def test_locomo_category_5_option_replies_map_to_the_option_text():
    gold = {"a": NM, "b": "self-care is important"}
    assert memorybench_locomo_f1("(a)", gold, 5) == 1.0
    assert memorybench_locomo_f1(" A ", gold, 5) == 1.0
    assert memorybench_locomo_f1("b", gold, 5) == 0.0
    assert memorybench_locomo_f1("(b)", json.dumps(gold), 5) == 0.0  # the release's JSON text
    swapped = {"a": "self-care is important", "b": NM}
    assert memorybench_locomo_f1("(b)", swapped, 5) == 1.0
    assert memorybench_locomo_f1("Not mentioned.", swapped, 5) == 1.0
    # the reference maps any 3-character reply to an option ("yes" -> (b) -> 1.0); not here
    assert memorybench_locomo_f1("yes", swapped, 5) == 0.0


def test_locomo_f1_other_categories():
    # cat 4: gold tokens brave, by, sara, bareil; reply "Brave": P = 1, R = 1/4, F1 = 0.5/1.25
    assert memorybench_locomo_f1("Brave", "Brave by Sara Bareilles", 4) == pytest.approx(0.4)
    # cat 1: mean over gold parts of the best part F1: paris -> 0, rome -> 1
    assert memorybench_locomo_f1("Rome", "Paris, Rome", 1) == pytest.approx(0.5)
    # cat 3: the gold is cut at its first ";"
    assert memorybench_locomo_f1("likely yes", "Likely yes; she said so", 3) == 1.0
    # cat 2: numbers in the gold compare as text; "in 2022" vs "2022": P = 1/2, R = 1, F1 = 2/3
    assert memorybench_locomo_f1("2022", 2022, 2) == 1.0
    assert memorybench_locomo_f1("in 2022", 2022, 2) == pytest.approx(2 / 3)


def test_evaluate_item_locomo(tmp_path):
    score = run(
        _score(
            q("Locomo-3", {"golden_answer": {"a": NM, "b": "x"}, "category": 5}),
            "(a)",
            offline(tmp_path),
        )
    )
    assert score == ItemScore("f1", 1.0, "", True)


# ------------------------------------------------------------------ DialSim accuracy


def test_dialsim_exact_match_is_one_sided_on_the_final_dot():
    assert exact_match(" monica ", "Monica")
    assert exact_match("Monica.", "Monica")
    assert not exact_match("Monica", "Monica.")  # gold with "." vs reply without: judge decides
    assert parse_verdict("Correct") is True and parse_verdict(" wrong. ") is False
    # a verbose reply is read for the verdict it states (the reference would retry it)
    assert parse_verdict("Correct, because Monica said so") is True
    assert parse_verdict("The prediction is not correct: Ross cooked.") is False
    for text in ("Correct or wrong?", "Partly correct, partly wrong."):
        with pytest.raises(UnparseableReply):
            parse_verdict(text)


def test_dialsim_exact_match_needs_no_judge_and_the_rest_goes_to_it(tmp_path):
    item = q("DialSim-friends", {"golden_answer": "Monica."}, question="Who cooked?")
    exact = run(
        _score(
            {**item, "meta": json.dumps({"info": {"golden_answer": "Monica"}})},
            "monica.",
            offline(tmp_path),
        )
    )
    assert exact == ItemScore("accuracy", 1.0, "", True)
    judged = run(_score(item, "Monica", offline(tmp_path)))
    assert judged == ItemScore("accuracy", 1.0, "Correct", True)  # the offline judge's overlap
    wrong = run(_score(item, "Ross did.", offline(tmp_path)))
    assert wrong == ItemScore("accuracy", 0.0, "Wrong", True)


def test_dialsim_judge_reply_reasked_then_counted(tmp_path):
    item = q("DialSim-bigbang", {"golden_answer": "Penny"}, question="Who knocked?")
    with OpenAITestServer(reply=Script("Maybe?", "Correct")) as server:
        score = run(_score(item, "the neighbour", scripted(tmp_path, server)))
    assert score == ItemScore("accuracy", 1.0, "Maybe?\n---\nCorrect", True)
    with OpenAITestServer(reply=Script("I cannot tell.")) as server:
        gateway = scripted(tmp_path / "b", server)
        score = run(_score(item, "the neighbour", gateway))
        assert server.stats().total == 3  # 1 + 2 re-asks, as the reference's patience of 3
    assert (score.value, score.parse_ok) == (None, False)  # unscored, never guessed
    assert item_value("DialSim-bigbang", score) == 0.0  # the reference's False, in :all
    assert gateway.ledger.totals().parse_failures == 1


# ------------------------------------------------------------------ NFCats judge


def test_nfcats_score_is_the_final_explicit_one_on_the_scale():
    assert [
        parse_score(t)
        for t in ("4", "5.", "3/5", "2 - partial", "###Score of the answer: 1", "Score: 4")
    ] == [4, 5, 3, 2, 1, 4]
    for text in ("10", "6", "Score: 8/10", "4.5", "", "The answer is fine.", "3 or 4"):
        with pytest.raises(UnparseableReply):
            parse_score(text)


def test_nfcats_offline_score_by_coverage_of_the_question():
    # question stems {ironsid, mean}
    assert (
        nfcats_offline_score("ironside meaning", "Ironside means a person of great bravery.") == 4
    )
    assert nfcats_offline_score("ironside meaning", "Ironside is a surname.") == 3  # 1/2 covered
    assert nfcats_offline_score("ironside meaning", "Bananas are yellow.") == 1
    assert nfcats_offline_score("ironside meaning", "I don't know.") == 1
    long = "Ironside means a person of great bravery, " + " ".join(f"word{i}" for i in range(15))
    assert nfcats_offline_score("ironside meaning", long) == 5  # covered, 18 new content words


def test_nfcats_judge_failure_scores_the_bottom_of_the_scale_and_is_counted(tmp_path):
    item = q("NFCats", {}, question="Please answer ...\n\nQuestion: ironside meaning")
    with OpenAITestServer(reply=Script("10", "4")) as server:
        score = run(_score(item, "A person of great bravery.", scripted(tmp_path, server)))
    assert score == ItemScore("score", 4.0, "10\n---\n4", True)
    with OpenAITestServer(reply=Script("It is good.")) as server:
        score = run(_score(item, "A person of great bravery.", scripted(tmp_path / "b", server)))
    assert (score.value, score.parse_ok) == (None, False)  # unscored, never guessed
    assert item_value("NFCats", score) == 1.0  # the bottom of the scale, in :all
    assert score.raw_reply == "It is good.\n---\nIt is good.\n---\nIt is good."


from tests.shared_data import SHARED_DATA as SHARED  # noqa: E402

MB = SHARED / "memorybench" if SHARED else None
needs_shared = pytest.mark.skipif(MB is None or not MB.exists(), reason="no ../shared data")


def _real(source, dataset):
    from mnemoflow.data.registry import load_benchmark

    spec = {
        "loader": "memorybench",
        "source": {"path": str(MB / "raw" / source)},
        "set": f"dataset:{dataset}",
        "configs": str(MB / "configs" / "datasets"),
    }
    return load_benchmark(spec).questions.set_index("question_id", drop=False)


@needs_shared
def test_nfcats_offline_judge_on_the_real_csv(tmp_path):
    questions = _real("NFCats_test.csv", "NFCats")
    # test item 1529: "Approximately one million Protestants in modern France represent some 2%
    # of its population." -> stems approxim, million, protest, modern, franc, repres, 2, popul
    item = questions.loc["NFCats:1529"].to_dict()
    echo = "Protestants in modern France are about 2% of the population."
    scores = [
        run(_score(item, text, offline(tmp_path / str(i))))
        for i, text in enumerate([echo, "Paris is the capital.", ""])
    ]
    assert [(s.metric, s.value, s.raw_reply, s.parse_ok) for s in scores] == [
        ("score", 3.0, "3", True),  # protest, modern, franc, popul: 4 of 8 stems
        ("score", 1.0, "1", True),
        ("score", 1.0, "1", True),
    ]


# ------------------------------------------------------------------ LexEval ROUGE-L


@needs_shared
def test_lexeval_rouge_l_on_real_items(tmp_path):
    questions = _real("LexEval-QA_5_4.jsonl", "LexEval-QA")
    gold = {i: questions.loc[f"LexEval-QA:{i}", "answer"] for i in (56, 128, 332)}

    def score(i, response):
        return run(_score(questions.loc[f"LexEval-QA:{i}"].to_dict(), response, offline(tmp_path)))

    # values the reference (rouge 1.0.1 over jieba tokens) gives for the same texts
    assert score(128, gold[332]).value == pytest.approx(0.1604938222222224, abs=1e-12)
    assert score(128, gold[128][: len(gold[128]) // 2]).value == pytest.approx(
        0.7027026981446312, abs=1e-12
    )
    assert score(128, gold[128]).value == pytest.approx(0.999999995, abs=1e-12)
    # item 56's answer has 1,278 jieba tokens: the reference's recursive LCS overflows and it
    # scores 0.0 even against itself; the true values:
    assert score(56, gold[56]).value == pytest.approx(0.999999995, abs=1e-12)
    assert score(56, gold[56][: len(gold[56]) // 2]).value == pytest.approx(
        0.7178631005546807, abs=1e-12
    )
    assert score(56, "").value == 0.0


# ------------------------------------------------------------------ entry point, bad input


def test_a_record_without_info_names_the_record_and_field(tmp_path):
    item = {"dataset": "LexEval-QA", "question_id": "LexEval-QA:7", "question": "?", "meta": "{}"}
    with pytest.raises(DataError) as info:
        run(_score(item, "x", offline(tmp_path)))
    assert str(info.value) == "questions: record LexEval-QA:7: missing field 'info' in meta"


def test_every_registered_dataset_is_supported_and_a_stranger_fails_with_one_line():
    check_supported(
        ["Locomo-0", "DialSim-friends", "LexEval-Judge", "NFCats", "WritingPrompts", "JuDGE",
         "HelloBench-Creative&Design", "WritingBench-Politics&Law", "IdeaBench", "JRE-L",
         "LimitGen-Syn"]
    )  # fmt: skip
    with pytest.raises(ConfigError) as info:
        check_supported(["NFCats", "FooBench-QA"])
    assert str(info.value) == (
        "memorybench: dataset 'FooBench-QA' is not a MemoryBench dataset; families: DialSim, "
        "HelloBench, IdeaBench, JRE-L, JuDGE, LexEval, LimitGen, Locomo, NFCats, WritingBench, "
        "WritingPrompts"
    )


def test_item_value_is_the_reference_rule():
    assert item_value("DialSim-friends", {"accuracy": True}) == 1.0
    assert item_value("DialSim-friends", {"accuracy": False}) == 0.0
    assert item_value("Locomo-4", ItemScore("f1", 0.4)) == 0.4
    assert item_value("NFCats", [ItemScore("score", None, "??", False)]) == 1.0
    # LimitGen-Syn: its rating, not its first test metric (accuracy)
    assert item_value("LimitGen-Syn", {"accuracy": True, "rating": 3}) == 3.0
    # the multi-metric datasets: the fused score, whatever the sub-metrics say
    subs = [ItemScore("Rouge-L", 0.2), ItemScore("llm_as_judge_score", 7.0, "7")]
    assert item_value("JRE-L", subs) == 7.0
    # a judge that never parsed: the bottom of its scale, counted through parse_ok
    assert item_value("JuDGE", [ItemScore("llm_as_judge_score", None, "x", False)]) == 1.0
    assert item_value("HelloBench-Creative&Design", [ItemScore("avg_score", None)]) == 0.0
    assert item_value("WritingBench-Politics&Law", [ItemScore("score", None)]) == 1.0
    with pytest.raises(ValueError, match="no value of metric 'meteor'"):
        item_value("WritingPrompts", [ItemScore("f1", 0.3)])


def test_a_new_family_is_one_class_scored_by_both_protocols(monkeypatch):
    """A family registered alone (no other table edited) is found by the paper protocol, the
    judge protocol and the simulated user alike, with its required fields and failure values."""
    from mnemoflow.eval.memorybench import memorybench_judge_protocol as jp
    from mnemoflow.eval.memorybench import memorybench_metrics as mm
    from mnemoflow.registry import Entry

    mm.FAMILIES.names()  # the built-ins first, so the throwaway one is not overwritten

    class ExactQA(mm.MetricFamily):
        name = "ExactQA"
        value = "exact"
        required_info = ("golden_answer",)
        judge_failure_value = 0.1
        user_persona = "You are simulating a user who asked a short factual question."
        user_criteria = ("Correctness of the answer",)
        user_task = "asking a short factual question"

        async def score(self, item, gateway, **options):
            gold = str(item.info["golden_answer"])
            return [mm.ItemScore(self.value, float(item.response.strip() == gold))]

        async def judge_score(self, item, gateway):
            ok = item.response.strip() != "?"
            return mm.ItemScore(jp.METRIC, 1.0 if ok else None, "", ok)

        def user_context(self, dataset, info, gold):
            return f"{dataset}: {gold}"

    monkeypatch.setitem(mm.FAMILIES.entries, "ExactQA", Entry(ExactQA, {}))
    question = {"dataset": "ExactQA-1", "question_id": "ExactQA-1:0", "question": "Q",
                "meta": json.dumps({"info": {"golden_answer": "42"}})}  # fmt: skip
    assert run(mm.evaluate_item(question, "42", None)).value == 1.0
    assert run(jp.evaluate_item(question, "42", None)).value == 1.0
    unscored = run(jp.evaluate_item(question, "?", None))
    assert jp.item_value("ExactQA-1", unscored) == 0.1
    assert jp.metric_of("ExactQA-1") == (jp.METRIC, True)
    user = jp.simulated_user("ExactQA-1")
    assert (user.persona, user.criteria, user.task) == (
        ExactQA.user_persona,
        ("Correctness of the answer",),
        "asking a short factual question",
    )
    assert user.context({}, "42") == "ExactQA-1: 42"
    bare = {**question, "meta": json.dumps({"info": {}})}
    with pytest.raises(DataError, match=r"record ExactQA-1:0: missing field 'info.golden_answer'"):
        run(jp.evaluate_item(bare, "42", None))
