"""JuDGE (Chinese criminal judgment documents): section METEOR and BERTScore, crime and statute
recall / precision / F1, sentence-length and fine scores, then one fusion call to a 1-10 score.

Reference (MemoryBench ``src/dataset/JuDGE.py`` and ``src/dataset/judge/``), re-implemented:

- sections: after normalizing punctuation (ASCII ":", "(", ")" and "," between non-digits to
  full width, spaces and HTML removed), the document is cut in order into heading, fact (up to
  本院认为), reason (up to and including 判决如下 / 裁定如下) and judgment (up to the first of a
  list of endings, tried in list order: 如不服本判决, 审判长, 附录, …); each piece is removed from
  the rest before the next is cut;
- ``reasoning_meteor`` / ``judge_meteor``: nltk METEOR over jieba tokens of the reason and
  judgment sections, None unless all four sections are non-empty; ``*_bert_score``: BERTScore F1
  of the jieba-tokenized sections joined by spaces (reference model bert-base-chinese);
- crimes: every ``犯…罪`` of the judgment section (the whole text when there is none), split at
  enumeration marks, cut before 撤销; statutes: ``第…条`` numbers inside citations of the Criminal
  Law (《中华人民共和国刑法》 / 《刑法》) in the reason section (else the whole text); recall and
  precision over the sets (0 for an empty set), F1 = 2PR / (P + R);
- time: months of 管制 / 拘役 / 有期徒刑 terms (years x 12), 240 for 无期徒刑, 10001 for 死刑,
  summed over the distinct sentence strings of the judgment section; amount: the distinct
  ``罚金…元`` sums; score = 1 - |e - g| / max(e, g), 1 when both are 0, 0 when only one side has
  a value or only one is a death sentence, None when neither side has one.

Differences (docs/metrics.md): the reference's fusion prompt fills every metric slot with the
time score (memorybench.md 5.3); here each slot gets its own value ("None" when it has none).
Crime names are compared as written after the reference's clean-up (spaces, parentheses and a
leading 有/的/了 removed), without its mapping of variant names onto the ~470 statutory names by
keyword and edit distance; names written the statutory way compare the same. ``crime_f1`` and
``penalcode_index_f1``, listed but never computed by the reference, are computed here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mnemoflow.eval.memorybench.chinese_numbers import numbers_in
from mnemoflow.eval.memorybench.fusion import FusedScorer, computed_ask
from mnemoflow.eval.metrics.bertscore import BertScoreModel, bertscore

DATASET = "JuDGE"
PROMPT_VERSION = "judge-fusion-v1"
TASK = "judge_doc_fusion"
_CJK = "\u4e00-\u9fa5"

# --- sections ----------------------------------------------------------------------------------


def normalize_punctuation(text: str) -> str:
    text = text.replace(":", "：").replace(" ", "").replace("(", "（").replace(")", "）")
    text = text.replace("\u3000", " ").replace("\xa0", " ")
    for junk in ("<p>", "</p>", "<br>", "&#xD;", "\ufffd"):
        text = text.replace(junk, "")
    text = re.sub(r"(?<!\d),(?!\d)", "，", text)
    text = re.sub(r"<(style|script)\b.*?</\1>", " ", text, flags=re.DOTALL | re.IGNORECASE)
    pieces = [html.unescape(p).strip() for p in re.split(r"<[^>]+>", text)]
    return " ".join(p for p in pieces if p)


def _up_to(patterns: list[str], content: str, inclusive: bool) -> str:
    """Text from the start up to the first pattern (in list order) that occurs anywhere."""
    for pattern in patterns:
        found = re.search(rf".*?({pattern})" if inclusive else rf".*?(?={pattern})", content, re.S)
        if found:
            return found.group()
    return ""


_HEADING = [rf"审理终结[{_CJK}]{{0,10}}。", rf"公开开庭审理[{_CJK}]{{0,10}}。"]
_HEADING_FALLBACK = [rf"[{_CJK}]{{0,10}}(公诉|抗诉)机关[{_CJK}，、]{{0,30}}(认为|指控)"]
_REASON_END = [r"判决如下[:：,，\n]", r"判决如下", r"裁定(如下)?[:：\n]"]
_JUDGMENT_END = [
    rf"如[{_CJK}]{{0,3}}不服本判决",
    r"\n\s*本判决为终审判决",
    rf"如[{_CJK}]{{0,5}}未按本判决指定的期间[{_CJK}]{{0,5}}给付金钱义务",
    r"\n\s*(代理)?审[\s]{0,3}判[\s]{0,3}长",
    r"\n\s*(代理)?审[\s]{0,3}判[\s]{0,3}员",
    "附录",
    "附：",
    rf"附[{_CJK}]{{0,10}}法律[{_CJK}]{{0,10}}",
    rf"附[{_CJK}]{{0,10}}：",
    r"\n\s*本案[^\n]{0,10}法律",
    r"\n《",
    "$",
]


@dataclass(frozen=True)
class Sections:
    heading: str
    fact: str
    reason: str
    judgment: str


def sections(document: str) -> Sections:
    rest = normalize_punctuation(document)

    def cut(piece: str) -> str:
        return rest.replace(piece, "") if piece.strip() else rest

    heading = _up_to(_HEADING, rest, inclusive=True)
    if not re.sub(r"\s+", "", heading):
        heading = _up_to(_HEADING_FALLBACK, rest, inclusive=False)
    rest = cut(heading)
    fact = _up_to(["本院认为"], rest, inclusive=False)
    rest = cut(fact)
    reason = _up_to(_REASON_END, rest, inclusive=True) or rest
    rest = cut(reason)
    judgment = _up_to(_JUDGMENT_END, rest, inclusive=False) or rest
    return Sections(heading, fact, reason, judgment)


# --- crimes, statutes, sentences, fines ---------------------------------------------------------

_CRIME = re.compile(r"犯([^罪犯，。；《》（）]+?罪)")
_ENUMERATION = re.compile(r"[一二三四五六七八九十]{1,3}、|（[一二三四五六七八九十]{1,3}）")


def clean_crime(name: str) -> str:
    name = name.replace(" ", "")
    if "（" in name:
        name = name[: name.find("（")] + name[name.find("）") + 1 :]
    return name[1:] if name[:1] in ("有", "的", "了") else name


def _crimes_in(text: str) -> set[str]:
    lines = _ENUMERATION.split(text)
    if len(lines) == 1:
        lines = re.split(r"[；。]", lines[0])
    found = set()
    for line in lines:
        if "撤销" in line:
            line = line[: line.find("撤销")]
        found.update(_CRIME.findall(line.replace("罪犯", "")))
    return {name for name in map(clean_crime, found) if name}


def crimes(document: str) -> set[str]:
    return _crimes_in(sections(document).judgment) or _crimes_in(document)


_LAW_CITATION = [
    r"《中华人民共和国刑法》第.*?[。《判附规]",
    r"《刑法》第.*?[。《判附规]",
    r"《中华人民共和国刑法》\s?[零一二三四五六七八九十第]+.*?[。《判附规]",
]
_ARTICLE = re.compile(r"第[一二三四五六七八九零十百]+条")


def statutes(document: str) -> set[str]:
    citations: set[str] = set()
    for text in (sections(document).reason, document):
        for pattern in _LAW_CITATION:
            citations.update(re.findall(pattern, text))
        if citations:
            break
    articles = set()
    for citation in citations:
        for article in _ARTICLE.findall(citation):
            digits = numbers_in(article)
            if len(digits) == 1:
                articles.add(digits[0])
    return articles


_TERMS = ("管制", "拘役", "有期徒刑")
_OTHER_SENTENCES = ("无期徒刑", "死刑", "无罪", "免予刑事处罚", "免于刑事处罚", "免予刑事处分")
LIFE_MONTHS, DEATH = 240, 10001


def _sentence_strings(text: str) -> list[str]:
    found = []
    for term in _TERMS:
        for match in re.findall(rf"{term}.{{1,7}}[年月]", text):
            stop = re.search(r"[,;，。！？、；：（以缓至]", match)
            found.append(match[: stop.start()] if stop else match)
    for term in _OTHER_SENTENCES:
        found += re.findall(term, text)
    return found


def _summed_mentions(
    document: str, find: Callable[[str], list[str]], value: Callable[[str, list[str]], int]
) -> int:
    """The reference's rule for a sentence or a fine: the distinct mentions ``find`` picks from
    the judgment section (from the whole document when that section has none), each mention's
    ``value(text, numbers)`` summed; -1 when there is no mention."""
    mentions = set(find(sections(document).judgment)) or set(find(document))
    if not mentions:
        return -1
    return sum(value(text, numbers_in(text)) for text in mentions)


def _months(text: str, digits: list[str]) -> int:
    if len(digits) == 2:
        both = "年" in text and "月" in text
        return int(float(digits[0])) * 12 + int(float(digits[1])) if both else int(float(digits[0]))
    if len(digits) == 1:
        value = int(float(digits[0]))
        return value * 12 if "年" in text else value if "月" in text else 0
    if not digits:
        return LIFE_MONTHS if "无期徒刑" in text else DEATH if "死刑" in text else 0
    return 0


def sentence_months(document: str) -> int:
    """Summed months of the distinct sentences (-1 when none is found)."""
    return _summed_mentions(document, _sentence_strings, _months)


def _fine_strings(text: str) -> list[str]:
    found = []
    for match in re.findall(r"罚金.{1,15}元", text):
        stop = re.search(r"[，。！？、；：以已至（]", match)
        piece = match[: stop.start()] if stop else match
        if "元" in piece:
            found.append(piece.replace(",", ""))
    return found


def _yuan(text: str, digits: list[str]) -> int:
    return int(digits[0].split(".")[0]) if len(digits) == 1 else 0


def fine_amount(document: str) -> int:
    """Summed yuan of the distinct fines (-1 when none is found)."""
    return _summed_mentions(document, _fine_strings, _yuan)


def closeness(expected: int, generated: int) -> float | None:
    """The reference's penalty score: None when neither side has a value."""
    if expected < 0 and generated < 0:
        return None
    if expected == generated == 0:
        return 1.0
    if (expected < 0) != (generated < 0):
        return 0.0
    if (expected - 10000) * (generated - 10000) < 0:
        return 0.0
    return 1 - abs(expected - generated) / max(expected, generated)


def recall_precision_f1(expected: set, generated: set) -> tuple[float, float, float]:
    hits = len(expected & generated)
    recall = hits / len(expected) if expected else 0.0
    precision = hits / len(generated) if generated else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return recall, precision, f1


# --- the item ----------------------------------------------------------------------------------


def _jieba_tokens(text: str) -> list[str]:
    import jieba

    jieba.setLogLevel(60)
    return list(jieba.cut(text))


def sub_metrics(response: str, gold: str, model: BertScoreModel | None = None) -> dict[str, Any]:
    from mnemoflow.eval.metrics.meteor import meteor_tokens

    gen, exp = sections(response), sections(gold)
    if exp.reason and exp.judgment and gen.reason and gen.judgment:
        reasoning_meteor = meteor_tokens(_jieba_tokens(exp.reason), _jieba_tokens(gen.reason))
        judge_meteor = meteor_tokens(_jieba_tokens(exp.judgment), _jieba_tokens(gen.judgment))
    else:
        reasoning_meteor = judge_meteor = None
    spaced = [
        " ".join(_jieba_tokens(text))
        for text in (gen.reason, exp.reason, gen.judgment, exp.judgment)
    ]
    bert = [
        0.0 if not (cand.strip() and ref.strip()) else None
        for cand, ref in (spaced[:2], spaced[2:])
    ]
    pending = [i for i, value in enumerate(bert) if value is None]
    if pending:
        pairs = [(spaced[0], spaced[1]), (spaced[2], spaced[3])]
        scored = bertscore([pairs[i][0] for i in pending], [pairs[i][1] for i in pending], model)
        for i, (_, _, f1) in zip(pending, scored, strict=True):
            bert[i] = f1
    crime_r, crime_p, crime_f = recall_precision_f1(crimes(gold), crimes(response))
    law_r, law_p, law_f = recall_precision_f1(statutes(gold), statutes(response))
    return {
        "reasoning_meteor": reasoning_meteor,
        "judge_meteor": judge_meteor,
        "reasoning_bert_score": bert[0],
        "judge_bert_score": bert[1],
        "crime_recall": crime_r,
        "crime_precision": crime_p,
        "crime_f1": crime_f,
        "penalcode_index_recall": law_r,
        "penalcode_index_precision": law_p,
        "penalcode_index_f1": law_f,
        "time_score": closeness(sentence_months(gold), sentence_months(response)),
        "amount_score": closeness(fine_amount(gold), fine_amount(response)),
    }


PROMPT = (
    "You are an expert in legal AI. Judge the quality of a criminal judgment document that a "
    "model generated, using the case facts, the real judgment and metrics computed beforehand.\n"
    "\n"
    "Case facts given to the model:\n{facts}\n\n"
    "Generated judgment:\n{generated}\n\n"
    "Real judgment (ground truth):\n{gold}\n\n"
    "Metrics comparing the generated judgment with the ground truth (1.00 a perfect match on "
    "that metric, 0.00 a complete mismatch, None when it could not be computed):\n"
    "1. Penalty accuracy\n"
    "time_score: {time_score} (how close the prison term is)\n"
    "amount_score: {amount_score} (how close the fine is)\n"
    "2. Conviction accuracy\n"
    "crime_recall: {crime_recall} (share of the real charges the document names)\n"
    "crime_precision: {crime_precision} (share of the named charges that are real)\n"
    "3. Citation and reasoning accuracy\n"
    "penalcode_index_recall: {penalcode_index_recall} (share of the relevant articles of the "
    "Criminal Law it cites)\n"
    "penalcode_index_precision: {penalcode_index_precision} (share of its citations that are "
    "correct)\n"
    "reasoning_meteor: {reasoning_meteor} (METEOR similarity of the court's reasoning section)\n"
    "reasoning_bert_score: {reasoning_bert_score} (BERTScore of the reasoning section)\n"
    "judge_meteor: {judge_meteor} (METEOR similarity of the verdict section)\n"
    "judge_bert_score: {judge_bert_score} (BERTScore of the verdict section)\n"
    "\n"
    "Considering the facts, the generated document, the ground truth and all the metrics, give "
    "the generated judgment one integer score from 1 to 10: 1 is extremely poor (irrelevant, "
    "wrong in fact or law, nonsensical), 10 is excellent (legally sound, accurate, well "
    "reasoned, well structured, nearly indistinguishable from the real judgment).\n"
    "\n"
    "Your response should be only a single integer."
)
SHOWN = (
    "time_score",
    "amount_score",
    "crime_recall",
    "crime_precision",
    "penalcode_index_recall",
    "penalcode_index_precision",
    "reasoning_meteor",
    "reasoning_bert_score",
    "judge_meteor",
    "judge_bert_score",
)


def fusion_prompt(facts: str, response: str, gold: str, metrics: dict[str, Any]) -> str:
    """Each slot its own value (the reference shows the time score in every slot)."""
    values = {name: "None" if metrics[name] is None else f"{metrics[name]:.4f}" for name in SHOWN}
    return PROMPT.format(facts=facts, generated=response, gold=gold, **values)


#: ``judge_doc_score(gateway, test_idx, facts, response, info, store, model=None)``: ``facts`` is
#: the item's input prompt, ``info["golden_answer"]`` the real judgment.
judge_doc_score = FusedScorer(
    DATASET, PROMPT_VERSION, "golden_answer", computed_ask(TASK, sub_metrics, fusion_prompt, SHOWN)
)
