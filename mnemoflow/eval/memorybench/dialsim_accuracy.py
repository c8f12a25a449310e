"""DialSim accuracy as MemoryBench scores it (``src/dataset/DialSim.py:evaluate_single``).

Correct without a model call when the reply equals the gold after ``lower().strip()``, or equals
the gold followed by "." (the reference's one-sided tolerance: a gold ending in "." against a reply
without it still goes to the judge). Otherwise the judge role decides with the reference's
prompts; its reply is read by :func:`mnemoflow.eval.metrics.verdicts.correct_wrong` (the reference
accepts only "Correct" / "Wrong" with an optional final "."; a verbose "Correct, because ..." is
its retry, here the verdict it states). A reply stating neither or both is re-asked by the
gateway (the reference retries up to 3 times in all, as the gateway's default 1 + 2 re-asks does);
still unparseable, the item is stored unscored (``parse_ok`` false, no value) and counted in the
ledger; its item value is 0, as the reference returns False.

The reference's judge runs at temperature 0.2, top_p 0.1: bind the judge role so for a faithful
run (docs/memorybench.md).
"""

from __future__ import annotations

from mnemoflow.eval.metrics import verdicts
from mnemoflow.llm.types import ChatRequest

TASK = "memorybench_dialsim_judge"

SYSTEM_PROMPT = """You have to judge the correctness of a <prediction> to a corresponding <question>, based on <true answer>.

If the <prediction> basically says the same thing as the <true answer>, you should say that the <prediction> is correct.
Otherwise, you should say that the <prediction> is wrong.

Your answer can only be "Correct" or "Wrong". Don't output any other text."""  # noqa: E501

USER_PROMPT = """<question>
<<<QUESTION>>>

<true answer>
<<<TRUEANSWER>>>

<prediction>
<<<PREDICTION>>>

Note: Your answer can only be "Correct" or "Wrong". Don't output any other text."""


def exact_match(response: str, gold: str) -> bool:
    """The reference's model-free test: equal after lower/strip, or equal to gold + "."."""
    said, expected = str(response).lower().strip(), str(gold).lower().strip()
    return said == expected or said == f"{expected}."


def parse_verdict(text: str) -> bool:
    """The reply's final explicit Correct / Wrong
    (:func:`mnemoflow.eval.metrics.verdicts.correct_wrong`): "Correct" -> True, "Wrong" -> False; a
    reply stating neither or both is unparseable."""
    return verdicts.correct_wrong(str(text)) == 1.0


def judge_request(question: str, gold: str, response: str) -> ChatRequest:
    user = (
        USER_PROMPT.replace("<<<QUESTION>>>", question)
        .replace("<<<TRUEANSWER>>>", gold)
        .replace("<<<PREDICTION>>>", response)
    )
    return ChatRequest(
        role="judge",
        task=TASK,
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        fields={"question": question, "reference": gold, "response": response},
    )


async def dialsim_accuracy(
    question: str, gold: str, response: str, gateway
) -> tuple[float, str, bool]:
    """(1.0 | 0.0, the judge's raw replies ("" without a call), parse_ok)."""
    if exact_match(response, gold):
        return 1.0, "", True
    reply = await gateway.chat(judge_request(question, gold, response), parse=parse_verdict)
    raw = "\n---\n".join(reply.raw_replies or [reply.text])
    if not reply.parse_ok:
        return 0.0, raw, False
    return (1.0 if reply.parsed else 0.0), raw, True
