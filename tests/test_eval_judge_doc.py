"""JuDGE: sections, crimes, statutes, sentence and fine scores on a worked document, Chinese
numerals, and the fusion prompt with each slot's own value (the reference's bug fixed)."""

from __future__ import annotations

import pytest

from mnemoflow.eval.memorybench import judge_doc as jd
from mnemoflow.eval.memorybench.chinese_numbers import numbers_in
from mnemoflow.eval.memorybench.fusion import FusionStore
from tests.scripted_backend import replies, run, scripted_gateway

GOLD = (
    "北京市海淀区人民法院刑事判决书。公诉机关北京市海淀区人民检察院。"
    "本院于2020年依法公开开庭审理了本案，现已审理终结。"
    "经审理查明，被告人张三于2019年盗窃财物价值人民币5,000元。"
    "本院认为，被告人张三以非法占有为目的，秘密窃取他人财物，数额较大，其行为已构成盗窃罪。"
    "依照《中华人民共和国刑法》第二百六十四条、第六十七条第三款之规定，判决如下：\n"
    "被告人张三犯盗窃罪，判处有期徒刑一年六个月，并处罚金人民币五千元。\n"
    "如不服本判决，可在接到判决书的第二日起十日内上诉。"
)
GENERATED = (
    "公诉机关指控被告人张三盗窃。本院认为，被告人张三的行为构成盗窃罪。"
    "依照《刑法》第二百六十四条之规定，判决如下：\n"
    "被告人张三犯盗窃罪，判处有期徒刑一年，并处罚金人民币三千元。"
)


def test_sections_of_a_judgment():
    parts = jd.sections(GOLD)
    assert parts.heading.endswith("现已审理终结。")
    assert parts.fact == "经审理查明，被告人张三于2019年盗窃财物价值人民币5,000元。"
    assert parts.reason.startswith("本院认为") and parts.reason.endswith("判决如下：")
    # the judgment ends before the first ending in list order ("如不服本判决")
    assert (
        parts.judgment == "\n被告人张三犯盗窃罪，判处有期徒刑一年六个月，并处罚金人民币五千元。\n"
    )


def test_punctuation_is_normalized_like_the_reference():
    assert jd.normalize_punctuation("a, b: (c) 1,000 <p>d</p>") == "a，b：（c）1,000d"


def test_crimes_statutes_sentences_fines():
    assert (jd.crimes(GOLD), jd.crimes(GENERATED)) == ({"盗窃罪"}, {"盗窃罪"})
    assert (jd.statutes(GOLD), jd.statutes(GENERATED)) == ({"264", "67"}, {"264"})
    # 一年六个月 = 12 + 6 = 18 months; 一年 = 12; 五千元 = 5000; 三千元 = 3000
    assert (jd.sentence_months(GOLD), jd.sentence_months(GENERATED)) == (18, 12)
    assert (jd.fine_amount(GOLD), jd.fine_amount(GENERATED)) == (5000, 3000)


def test_crime_names_are_cleaned_and_split_at_enumeration():
    text = "一、被告人甲犯故意伤害罪（未遂），判处拘役四个月；二、被告人乙犯有寻衅滋事罪"
    assert jd.crimes(text) == {"故意伤害罪", "寻衅滋事罪"}


def test_life_and_death_sentences():
    assert jd.sentence_months("判决如下：被告人犯故意杀人罪，判处无期徒刑。") == 240
    assert jd.sentence_months("判决如下：被告人犯故意杀人罪，判处死刑。") == 10001
    assert jd.sentence_months("判决如下：被告人无罪。") == 0
    assert jd.sentence_months("本案事实清楚。") == -1


@pytest.mark.parametrize(
    ("expected", "generated", "score"),
    [
        (18, 12, 1 - 6 / 18),
        (5000, 3000, 0.6),
        (0, 0, 1.0),
        (-1, 12, 0.0),  # only one side has a sentence
        (10001, 240, 0.0),  # only one side is a death sentence
        (-1, -1, None),  # neither: no score (shown as None)
    ],
)
def test_closeness(expected, generated, score):
    assert jd.closeness(expected, generated) == (score if score is None else pytest.approx(score))


def test_recall_precision_f1():
    # expected {264, 67}, generated {264}: R 1/2, P 1, F1 = 2/3
    assert jd.recall_precision_f1({"264", "67"}, {"264"}) == (0.5, 1.0, pytest.approx(2 / 3))
    assert jd.recall_precision_f1(set(), {"1"}) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("有期徒刑三年六个月", ["3", "6"]),
        ("罚金人民币五千元", ["5000"]),
        ("第二百六十四条", ["264"]),
        ("1.5万元", ["15000"]),
        ("三万五千", ["35000"]),
        ("十二个月", ["12"]),
        ("两年", ["2"]),
    ],
)
def test_chinese_numbers(text, digits):
    assert numbers_in(text) == digits


def test_fusion_prompt_fills_each_slot_with_its_own_value():
    metrics = dict.fromkeys(jd.SHOWN, None)
    metrics.update(time_score=0.6667, amount_score=0.6, crime_recall=1.0)
    prompt = jd.fusion_prompt("facts", "gen", "gold", metrics)
    assert "time_score: 0.6667" in prompt and "amount_score: 0.6000" in prompt
    assert "crime_recall: 1.0000" in prompt and "judge_meteor: None" in prompt
    assert prompt.endswith("Your response should be only a single integer.")


def test_judge_doc_item_end_to_end_with_one_fusion_call():
    gateway, backend = scripted_gateway(replies("6"))
    store = FusionStore()
    info = {"golden_answer": GOLD}
    score = run(jd.judge_doc_score(gateway, 9, "facts", GENERATED, info, store))
    subs = score.details["sub_metrics"]
    assert (score.value, score.parse_ok, len(backend.requests)) == (6.0, True, 1)
    assert (subs["time_score"], subs["amount_score"]) == (pytest.approx(2 / 3), 0.6)
    assert (subs["penalcode_index_f1"], subs["crime_f1"]) == (pytest.approx(2 / 3), 1.0)
    assert 0 < subs["reasoning_meteor"] < 1 and 0 < subs["judge_meteor"] <= 1
    again = run(jd.judge_doc_score(gateway, 9, "facts", GENERATED, info, store))
    assert (again.value, len(backend.requests)) == (6.0, 1)
