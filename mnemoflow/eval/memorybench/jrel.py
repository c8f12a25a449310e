"""JRE-L (popular-science report of a paper): Rouge-L, BERTScore-F1, CLI, FKGL, DCRS, then one
fusion call to a 1-10 score.

Reference (MemoryBench ``src/dataset/JRE-L.py``): against ``info["pr-abstract"]``, Hugging Face
``evaluate`` rouge (``rougeL``), ``BERTScorer(roberta-base)`` F1, and textstat's Coleman-Liau,
Flesch-Kincaid grade and Dale-Chall scores of the response; the fusion prompt shows the source
(the input prompt), the generated article, the reference article and the five metrics (4
decimals, each with what it means and which range is good) and asks for one integer 1-10.

Here: :mod:`rouge_l_en`, :mod:`bertscore` (bundled MiniLM unless the user points at roberta-base),
:mod:`readability`; the fusion prompt is written for this project with the same content, and is
asked once (:mod:`fusion`).
"""

from __future__ import annotations

from mnemoflow.eval.memorybench.fusion import FusedScorer, computed_ask, number
from mnemoflow.eval.metrics.bertscore import BertScoreModel, bertscore_f1
from mnemoflow.eval.metrics.readability import readability
from mnemoflow.eval.metrics.rouge_l_en import rouge_l

DATASET = "JRE-L"
PROMPT_VERSION = "jrel-fusion-v1"
TASK = "jrel_fusion"

PROMPT = (
    "You evaluate automatically written popular-science articles. Judge the generated "
    "article below using the source document, a reference article written by people, and "
    "metrics computed beforehand.\n"
    "\n"
    "Source document:\n"
    "{source}\n"
    "\n"
    "Generated article:\n"
    "{generated}\n"
    "\n"
    "Reference article:\n"
    "{reference}\n"
    "\n"
    "Metrics (generated vs reference, or of the generated text alone):\n"
    "- Rouge-L: {rouge_l} (0 to 1; longest common word sequence with the reference; "
    "higher means more of the reference's content is kept)\n"
    "- BERTScore-F1: {bertscore} (0 to 1; semantic similarity to the reference; higher "
    "means the core meaning is captured even when worded differently)\n"
    "- CLI, Coleman-Liau index: {cli} (US school grade needed to read it; for popular "
    "science about 8 to 12 is good, lower is easier)\n"
    "- FKGL, Flesch-Kincaid grade level: {fkgl} (also a US grade level; 8 to 12 is "
    "standard for a general audience)\n"
    "- DCRS, Dale-Chall readability score: {dcrs} (based on 3,000 familiar words; 4.9 or "
    "lower is easy for a fourth-grader, 9.0 to 9.9 is college level)\n"
    "\n"
    "Considering accuracy, readability, coherence and faithfulness to the source, and "
    "all the metrics, give the generated article one integer score from 1 to 10: 1 is "
    "unusable (irrelevant, wrong, nonsensical or unreadable), 10 is excellent (accurate, "
    "clear to a layperson, well built, engaging, faithful, as good as the reference).\n"
    "\n"
    "Your response should be only a single integer."
)


def sub_metrics(response: str, reference: str, model: BertScoreModel | None = None) -> dict:
    read = readability(response)
    return {
        "Rouge-L": rouge_l(reference, response),
        "BERTScore-F1": bertscore_f1(reference, response, model),
        "CLI": read.cli,
        "FKGL": read.fkgl,
        "DCRS": read.dcrs,
    }


def fusion_prompt(source: str, response: str, reference: str, metrics: dict) -> str:
    return PROMPT.format(
        source=source,
        generated=response,
        reference=reference,
        rouge_l=number(metrics["Rouge-L"]),
        bertscore=number(metrics["BERTScore-F1"]),
        cli=number(metrics["CLI"]),
        fkgl=number(metrics["FKGL"]),
        dcrs=number(metrics["DCRS"]),
    )


#: ``jrel_score(gateway, test_idx, source, response, info, store, model=None)``: ``source`` is the
#: item's input prompt, ``info["pr-abstract"]`` the reference article.
jrel_score = FusedScorer(
    DATASET,
    PROMPT_VERSION,
    "pr-abstract",
    computed_ask(TASK, sub_metrics, fusion_prompt, ("Rouge-L", "BERTScore-F1")),
)
