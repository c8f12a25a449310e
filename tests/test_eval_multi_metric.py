"""Multi-metric datasets: deterministic sub-metrics on worked examples, the fusion asked once,
IdeaBench's ranking and best-of-3, and BERTScore on the bundled model."""

from __future__ import annotations

import pytest

from mnemoflow.eval.memorybench import ideabench, jrel
from mnemoflow.eval.memorybench.fusion import FusionStore
from mnemoflow.eval.metrics import readability
from mnemoflow.eval.metrics.bertscore import bertscore
from mnemoflow.eval.metrics.rouge_l_en import lcs_length, rouge_l, tokens
from mnemoflow.llm.types import UnparseableReply
from tests.scripted_backend import replies, run, scripted_gateway

SUNNY = "The cat sat on the mat. It was a sunny day, and the cat was happy."


# --- English ROUGE-L ---------------------------------------------------------------------------


def test_rouge_l_worked_example():
    # ref 6 tokens, pred 7, LCS "the cat on the mat" = 5: P 5/7, R 5/6, F = 2PR/(P+R) = 10/13
    assert rouge_l("the cat sat on the mat", "the cat was sitting on the mat") == pytest.approx(
        10 / 13
    )


def test_rouge_l_tokenizes_like_rouge_score():
    # lowercase; anything outside [a-z0-9] separates (so "U.S." is "u s", "don't" is "don t")
    assert tokens("Don't stop: U.S.-made, 42%!") == ["don", "t", "stop", "u", "s", "made", "42"]
    # LCS of (police killed the gunman) and (the gunman was shot down by police) = 2: F = 4/11
    assert rouge_l("Police killed the gunman.", "The gunman was shot down by police.") == (
        pytest.approx(4 / 11)
    )
    assert (rouge_l("", "x"), rouge_l("a", "b")) == (0.0, 0.0)


def test_lcs_is_exact_on_long_texts():
    long = ["w"] * 3000
    assert lcs_length(long, long) == 3000  # no recursion limit (LexEval's rouge fails here)


# --- readability -------------------------------------------------------------------------------


def test_readability_worked_example():
    # 16 words, 2 sentences, 48 letters; syllables 18 (sunny, happy: 2 each)
    # CLI  = 0.058 * 300 - 0.296 * 12.5 - 15.8 = -2.1
    # FKGL = 0.39 * 8 + 11.8 * 18/16 - 15.59 = 0.805
    # DCRS = 0.1579 * 0 + 0.0496 * 8 = 0.3968 (every word is on the easy list)
    read = readability.readability(SUNNY)
    assert (read.cli, read.fkgl, read.dcrs) == (
        pytest.approx(-2.1),
        pytest.approx(0.805),
        pytest.approx(0.3968),
    )


def test_dale_chall_adds_the_constant_above_five_percent_difficult():
    # 4 words, 1 sentence; "photosynthesis" and "quantified" are not easy: 50% difficult
    # DCRS = 0.1579 * 50 + 0.0496 * 4 + 3.6365 = 11.7298
    assert readability.dale_chall("Photosynthesis was quantified today.") == pytest.approx(
        0.1579 * 50 + 0.0496 * 4 + 3.6365
    )


def test_sentences_of_two_words_or_fewer_are_not_counted():
    assert readability.sentence_count("Hi. Go now. We walked to the store today.") == 1
    assert readability.sentence_count("Hi. I am Bob. We walked to the store today.") == 2
    assert readability.sentence_count("") == 0


@pytest.mark.parametrize(
    ("word", "count"), [("cat", 1), ("happy", 2), ("make", 1), ("table", 2), ("the", 1)]
)
def test_syllables(word, count):
    assert readability.syllables(word) == count


# --- BERTScore on the bundled model ------------------------------------------------------------


def test_bertscore_bundled_model_is_monotone():
    reference = "The cat sat on the mat."
    (p, r, identical), (_, _, paraphrase), (_, _, unrelated) = bertscore(
        [reference, "A cat was sitting on a rug.", "Stock markets fell sharply on Monday."],
        [reference] * 3,
    )
    assert (p, r, identical) == (pytest.approx(1.0, abs=1e-4),) * 3
    assert identical > paraphrase > unrelated


# --- IdeaBench ---------------------------------------------------------------------------------


def test_hypotheses_are_split_and_padded_to_three():
    response = "Idea one.\n---IDEA-SEPARATOR---\n  \n---IDEA-SEPARATOR---Idea two."
    assert ideabench.hypotheses_of(response) == ["Idea one.", "Idea two.", "NULL"]


def test_ranking_rank_of_the_gold_abstract():
    reply = (
        "1. **Hypothesis C**: bold\n2. **Hypothesis A**: solid\n"
        "3. **Hypothesis B**\n4. **Hypothesis D**"
    )
    assert ideabench.ranking_parser(3)(reply) == 2  # score (2 - 1) / 3


@pytest.mark.parametrize(
    "reply",
    [
        "1. **Hypothesis B**\n2. **Hypothesis C**\n3. **Hypothesis D**",  # A missing
        "",  # the reference scores an empty ranking -1/3
        "1. **Hypothesis A**\n2. **Hypothesis A**\n3. **Hypothesis B**\n4. **Hypothesis C**",
    ],
)
def test_ranking_must_name_every_candidate_once(reply):
    with pytest.raises(UnparseableReply):
        ideabench.ranking_parser(3)(reply)


def ideabench_script(request, n):
    if request.task == "ideabench_overlap":
        return '{"rating": 6, "explanation": "x"}'
    if request.task == "ideabench_ranking":
        first = "A" if request.fields["criterion"] == "feasibility" else "B"
        rest = [x for x in "ABCD" if x != first]
        return "\n".join(f"{i}. **Hypothesis {x}**" for i, x in enumerate([first, *rest], 1))
    return "7"


def test_ideabench_sub_metrics_and_one_fusion():
    abstract = "Gene X regulates protein Y in mouse liver."
    response = "Weather on Mars.---IDEA-SEPARATOR---Gene X regulates protein Y in mice."
    gateway, backend = scripted_gateway(ideabench_script)
    store = FusionStore()
    score = run(
        ideabench.ideabench_score(gateway, 4, "ctx", response, {"abstract": abstract}, store)
    )
    metrics = score.details["sub_metrics"]
    assert metrics["best_hypothesis_by_bertf1"] == "Gene X regulates protein Y in mice."
    # novelty: A ranked 2nd of 4 -> (2-1)/3; feasibility: A first -> 0
    assert (metrics["llm_rating_score"], metrics["llm_novelty_ranking_score"]) == (
        6,
        pytest.approx(1 / 3),
    )
    assert metrics["llm_feasibility_ranking_score"] == 0.0
    assert (score.metric, score.value, score.raw_reply) == ("llm_as_judge_score", 7.0, "7")
    fusion_prompt = backend.requests[-1].messages[1]["content"]
    assert "llm_rating_score: 6" in fusion_prompt and "0.3333" in fusion_prompt
    assert [r.task for r in backend.requests].count("ideabench_fusion") == 1


# --- JRE-L and the fusion-once property --------------------------------------------------------


def test_jrel_fusion_is_asked_once_and_reused_by_later_summaries(tmp_path):
    info = {"pr-abstract": "Researchers found that cats sleep most of the day."}
    response = "Scientists found that cats sleep a lot. The study measured sleep."
    path = tmp_path / "fusion.json"
    gateway, backend = scripted_gateway(replies("8"))
    first = run(jrel.jrel_score(gateway, 3, "Write a report", response, info, FusionStore(path)))
    assert (first.value, first.raw_reply, len(backend.requests)) == (8.0, "8", 1)
    subs = first.details["sub_metrics"]
    assert subs["Rouge-L"] == pytest.approx(rouge_l(info["pr-abstract"], response))
    prompt = backend.requests[0].messages[1]["content"]
    assert f"{subs['Rouge-L']:.4f}" in prompt and f"{subs['DCRS']:.4f}" in prompt

    # a later summary (new process, new gateway, empty response cache) reads the stored value
    later, later_backend = scripted_gateway(replies("2"))
    again = run(jrel.jrel_score(later, 3, "Write a report", response, info, FusionStore(path)))
    assert (again.value, again.raw_reply, later_backend.requests) == (8.0, "8", [])
    assert later.ledger.totals().calls == 0


def test_a_stored_fusion_is_asked_again_when_the_judge_or_the_prompt_changed(tmp_path, monkeypatch):
    """The store keeps a fused score per item AND per setting: a run with another judge binding,
    or after the prompt was revised, must not read the old judge's number."""
    import dataclasses

    info = {"pr-abstract": "Researchers found that cats sleep most of the day."}
    response = "Scientists found that cats sleep a lot."
    path = tmp_path / "fusion.json"
    gateway, _ = scripted_gateway(replies("8"))
    assert run(jrel.jrel_score(gateway, 3, "src", response, info, FusionStore(path))).value == 8.0

    # same binding, same prompt: stored (no call)
    same, same_backend = scripted_gateway(replies("2"))
    assert run(jrel.jrel_score(same, 3, "src", response, info, FusionStore(path))).value == 8.0
    assert same_backend.requests == []

    # another judge model: asked again, 2 replaces 8
    other, other_backend = scripted_gateway(replies("2"))
    other.specs["judge"] = dataclasses.replace(other.specs["judge"], model="another-judge")
    again = run(jrel.jrel_score(other, 3, "src", response, info, FusionStore(path)))
    assert (again.value, len(other_backend.requests)) == (2.0, 1)

    # a revised prompt (new PROMPT_VERSION) under the first binding: asked again too
    monkeypatch.setattr(jrel.jrel_score, "prompt_version", "jrel-fusion-v2")
    revised, revised_backend = scripted_gateway(replies("5"))
    third = run(jrel.jrel_score(revised, 3, "src", response, info, FusionStore(path)))
    assert (third.value, third.prompt_version, len(revised_backend.requests)) == (
        5.0,
        "jrel-fusion-v2",
        1,
    )


def test_fusion_failure_is_stored_as_a_failure_not_zero():
    gateway, backend = scripted_gateway(replies("I would say 7 or 8"))
    info = {"pr-abstract": "cats sleep"}
    score = run(jrel.jrel_score(gateway, 1, "src", "cats nap", info, FusionStore()))
    assert (score.value, score.parse_ok, len(backend.requests)) == (None, False, 3)
