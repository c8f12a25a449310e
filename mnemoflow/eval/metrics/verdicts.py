"""Judge replies read as a person reads them: one reader per verdict scheme.

Schemes: yes / no (:func:`yes_no`), CORRECT / WRONG (:func:`correct_wrong`), a numeric score on
an integer scale (:func:`score`) and a label under a JSON key (:func:`json_label`). Each finds the
reply's final, explicit verdict and returns its value, or raises :class:`UnparseableReply` (the
gateway then re-asks, and what still does not parse is stored unscored, never guessed).

How a reply is read (docs/metrics.md "How verdicts are read"):

- a leading thinking block is dropped (as the gateway does);
- every statement of a verdict is found and ranked: a JSON object holding it, or a line labelled
  "Final answer:" / "Final verdict:" ... (rank 4); a labelled line ("Verdict: no", "Score: 4"), a
  line holding only the label, a bolded label, an upper-case CORRECT / WRONG (rank 3); "the
  answer is yes", "I would say no", "I rate it 4" (rank 2); a free statement ("No, it misses
  the date.", "so it is not correct", "Correct, it names the city") (rank 1);
- echoes of the instructions are not statements ("yes or no", "CORRECT if ...", "on a scale of
  1 to 5"), nor are questions ("Is it correct?"), conditionals and hedges ("if it had said X it
  would be correct", "at first glance wrong"), a clause overruled by a contrast ("wrong at first
  sight, but it is actually correct": the part after "but" / "however" / "although ..." stands)
  or a determiner ("no doubt", "no date is given");
- negation flips a CORRECT / WRONG statement ("not correct", "isn't correct", "nothing wrong");
- the highest rank decides; if its statements disagree (both verdicts stated), or there is
  none, the reply is not parsed.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mnemoflow.llm.gateway import strip_reasoning
from mnemoflow.llm.types import UnparseableReply

#: Ranks of a statement, strongest first.
FINAL, LABELLED, PHRASED, FREE = 4, 3, 2, 1

_KEYS = (
    r"answer|verdict|labels?|judge?ment|decision|grade|result|conclusion|assessment|"
    r"evaluation|output|rating|score|classification|response"
)
_MARKUP = r"[\s*_`#>\-\"'“”‘’()\[\]]*"
_LABELLED_PREFIX = re.compile(
    rf"^{_MARKUP}(?P<final>(?:my\s+|the\s+)?(?:final|overall|therefore)\s+)?(?:{_KEYS})"
    r"(?:\s+(?:of\s+the\s+answer|is))?\s*[*_`]*\s*[:=\-–—>]+\s*[*_`\"'“”‘’(\[]*\s*(?:not\s+)?$",
    re.IGNORECASE,
)
_ONLY_MARKUP = re.compile(rf"^{_MARKUP}(?:not\s+)?$", re.IGNORECASE)
_TRAIL_ONLY = re.compile(r"^[\s*_`\"'“”‘’)\].!,;:]*$")
_PHRASE = re.compile(
    r"(?:\b(?:my|the|final|your|this)\s+(?:answer|verdict|label|judge?ment|decision|grade|"
    r"assessment|conclusion|rating|score)\s+(?:is|would\s+be|should\s+be|will\s+be|here\s+is)"
    r"|\bi(?:'d|\s+would|\s+will|'ll)?\s+(?:say|answer|label\s+(?:it|this)(?:\s+as)?|mark\s+"
    r"(?:it|this)(?:\s+as)?|grade\s+(?:it|this)(?:\s+as)?|judge\s+(?:it|this)(?:\s+as)?|"
    r"go\s+with|conclude|rate\s+(?:it|this)(?:\s+as)?|call\s+(?:it|this))"
    r"|\b(?:so|thus|hence|therefore|overall|in\s+short|in\s+summary|all\s+in\s+all|verdict)"
    r"|->|=>|→)"
    r"[\s:,\-–—*_`\"'“”‘’]*(?:a\s+)?(?:(?:it|this)\s+is\s+)?(?:not\s+)?$",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:if|unless|might|may|could|would\s+have|at\s+first|initially|first\s+glance|"
    r"i\s+(?:first\s+)?thought|tempted|otherwise|whether|"
    r"one\s+might|considered|looks?\s+like\s+it\s+could)\b",
    re.IGNORECASE,
)
_CONTRAST = re.compile(
    r"\b(?:but|however|yet|though|although|nevertheless|nonetheless|still|that\s+said|"
    r"even\s+so|on\s+closer\s+(?:look|inspection|reading)|actually|on\s+reflection|"
    r"looking\s+again|wait)\b",
    re.IGNORECASE,
)
_CONCESSIVE = re.compile(r"\b(?:although|though|even\s+though|while|whereas|despite)\b", re.I)
_SENTENCE_END = re.compile(r"(?<!\d)[.!?]|[.!?](?!\d)|\n")  # "3.5" is a number


@dataclass(frozen=True)
class Statement:
    """One statement of a verdict in a reply: where it is, its rank and its value."""

    start: int
    end: int
    rank: int
    value: Any
    hedged: bool = False


class _Reply:
    """A reply prepared for reading: thinking dropped, echoes and JSON blanked, sentences known."""

    def __init__(self, text: str, echoes: list[re.Pattern]):
        self.text = strip_reasoning(str(text or ""))
        blank = self.text
        for pattern in echoes:
            blank = pattern.sub(lambda m: " " * len(m.group(0)), blank)
        self.objects: list[tuple[int, int, Any]] = list(_json_objects(self.text))
        for start, end, _ in self.objects:
            blank = blank[:start] + " " * (end - start) + blank[end:]
        self.blank = blank
        self.ends = [m for m in _SENTENCE_END.finditer(blank)]
        self.end_at = [m.start() for m in self.ends]

    def line_around(self, start: int, end: int) -> tuple[str, str]:
        """The text before and after a match on its line."""
        head = self.blank.rfind("\n", 0, start) + 1
        tail = self.blank.find("\n", end)
        return self.blank[head:start], self.blank[end : len(self.blank) if tail < 0 else tail]

    def sentence_around(self, start: int, end: int) -> tuple[str, str, str]:
        """(text before the match in its sentence, text after it, the sentence's last mark)."""
        before = bisect.bisect_left(self.end_at, start)  # sentence ends before the match
        head = self.ends[before - 1].end() if before else 0
        following = bisect.bisect_left(self.end_at, end)
        after = self.ends[following] if following < len(self.ends) else None
        stop = after.start() if after else len(self.blank)
        mark = after.group(0) if after else ""  # "?": the sentence is a question
        return self.blank[head:start], self.blank[end:stop], mark


def _json_objects(text: str) -> Iterator[tuple[int, int, Any]]:
    """Every top-level ``{...}`` in ``text`` that is JSON (or a Python dict literal)."""
    depth, start = 0, -1
    for i, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                body = text[start : i + 1]
                value = _load_object(body)
                if isinstance(value, dict):
                    yield start, i + 1, value


def _load_object(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        pass
    try:
        return ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


_CONDITIONAL = re.compile(r"\b(?:if|unless|had\s+(?:it|the|they)|would\s+have)\b", re.I)


def _hedged(sentence_head: str, clause: str, mark: str, rank: int) -> bool:
    """A question, a conditional ("if it had said X, yes") or a hedge ("at first glance")."""
    if mark == "?":
        return True
    if rank == FINAL:
        return False
    return bool(_HEDGE.search(clause) or _CONDITIONAL.search(sentence_head))


def _decide(statements: list[Statement], scheme: str, labels: str) -> Any:
    """The value of the strongest rank whose statements all agree; else unparseable."""
    firm = [s for s in statements if not s.hedged]
    if not firm:
        found = "only hedged or conditional mentions" if statements else "no verdict"
        raise UnparseableReply(f"it states {found}; reply with only {labels}")
    top = max(s.rank for s in firm)
    values = {s.value for s in firm if s.rank == top}
    if len(values) > 1:
        raise UnparseableReply(f"it states both verdicts ({scheme}); reply with only {labels}")
    return values.pop()


_APPEARANCE = re.compile(
    r"\b(?:looks?|seems?|appears?|might|may|could|at\s+first|initially|first\s+glance|"
    r"i\s+(?:first\s+)?thought|superficially|on\s+the\s+surface)\b",
    re.IGNORECASE,
)
_REVISION = re.compile(
    r"\b(?:actually|in\s+fact|really|still|overall|nevertheless|nonetheless|ultimately|"
    r"in\s+the\s+end|on\s+reflection|on\s+closer|after\s+all|so|therefore|thus|hence)\b",
    re.IGNORECASE,
)


def _overruled(reply: _Reply, statements: list[Statement]) -> list[Statement]:
    """Mark hedged a statement that a later, different one overrules: "wrong at first sight,
    but it is actually correct"; "Although the month is wrong, the answer is correct"; "Score:
    4. Actually, 3". Two plain statements joined by "but" ("the city is correct but the date
    is wrong") both stand: the reply states both verdicts."""
    out = list(statements)
    for i, early in enumerate(out):
        for late in out[i + 1 :]:
            ends = bisect.bisect_left(reply.end_at, late.start)
            if ends - bisect.bisect_left(reply.end_at, early.end) > 2:
                break  # later statements are farther still
            if late.value == early.value or late.hedged:
                continue
            between = reply.blank[early.end : late.start]
            head, _, _ = reply.sentence_around(early.start, early.end)
            contrast = _CONTRAST.search(between)
            concessive = _CONCESSIVE.search(head) and not _SENTENCE_END.search(between)
            appearance = _APPEARANCE.search(head[-60:] + reply.blank[early.start : early.end])
            revised = contrast and _REVISION.search(between[contrast.start() :])
            if concessive or (contrast and (appearance or revised)):
                out[i] = Statement(early.start, early.end, early.rank, early.value, True)
                break
    return out


# ---- label schemes: yes / no, CORRECT / WRONG ----------------------------------------------------


@dataclass(frozen=True)
class LabelScheme:
    """A two-label scheme: its words, their values, and what is an echo of the instructions."""

    name: str
    words: dict[str, float]  # lower-case word -> value
    negatable: bool  # "not correct" means WRONG; "not yes" is not English
    echoes: tuple[str, ...]
    ask: str  # what the re-ask asks for

    def word_pattern(self) -> re.Pattern:
        names = "|".join(sorted(self.words, key=len, reverse=True))
        return re.compile(rf"(?<![\w-])({names})(?![\w-])", re.IGNORECASE)


_NEGATION = re.compile(
    r"(?:\b(?:not|never|hardly|neither|nor|no\s+longer|far\s+from)\b|n't|n’t)"
    r"(?:\s+[\w'’]+){0,2}\s*$"
    r"|\b(?:nothing|none|no)\b(?:\s+[\w'’]+){0,6}?\s+(?:is|are|was|were|seems?|looks?)"
    r"(?:\s+(?:really|actually|at\s+all))?\s*$"
    r"|\b(?:nothing|anything)\s*$",
    re.IGNORECASE,
)
_PARTIAL = re.compile(
    r"\b(?:partially|partly|half|somewhat|almost|nearly|mostly|largely|semi|"
    r"not\s+(?:entirely|fully|completely|quite|totally|100%))[\s-]*$",
    re.IGNORECASE,
)
_NOT_ONLY = re.compile(r"\bnot\s+(?:only|just|merely)\b", re.IGNORECASE)
_PREDICATE = re.compile(
    r"(?:\b(?:is|are|was|were|be|been|being|seems?|seemed|looks?|appears?|remains?|considered|"
    r"deemed|judged|graded|marked|labell?ed|rated|classified|counts?\s+as|as|stays|it's|that's|"
    r"this's|answer's|response's|nothing|anything|something)\b|'s|’s|isn't|isn’t|wasn't|aren't)"
    r"[\s,]*(?:(?:not|also|still|actually|indeed|fully|entirely|completely|clearly|simply|"
    r"quite|partially|partly|essentially|basically|technically|largely|mostly|definitely|"
    r"certainly|therefore|thus|so|then|hence|really|plainly|just|obviously|\w+ly)[\s,]+){0,3}$",
    re.IGNORECASE,
)
_DETERMINER_NEXT = re.compile(
    r"^\s+(?!(?:it|this|that|they|he|she|we|i|you|the\s+response|the\s+answer|because|for|on|"
    r"in|about|regarding|to|as|at|with)\b)[a-z]",
    re.IGNORECASE,
)

YES_NO = LabelScheme(
    "yes/no",
    {"yes": 1.0, "no": 0.0},
    negatable=False,
    echoes=(
        r"\b(?:yes|no)\s*(?:/|\bor\b|\band/or\b|\|)\s*(?:yes|no)\b",
        r"\b(?:yes|no)[\"'”’]?\s*(?:if|when|only\s+if|unless|otherwise)\b",
        r"\b(?:answer(?:ing)?|say(?:ing)?|respond(?:ing)?|reply(?:ing)?|output(?:ting)?|"
        r"label(?:ling)?)\s+(?:with\s+)?[\"'“‘]?(?:yes|no)[\"'”’]?\s*(?:only|if|when)\b",
        r"\b(?:yes|no)-(?=\w)",
        r"\bno\s+(?:doubt|question|problem|issue|issues|way|one|longer|more|other|matter|"
        r"mention|reason|mistake|errors?|information|indication|evidence|sign|contradiction|"
        r"date|detail|details|need|less)\b",
    ),
    ask="the single word yes or no",
)
CORRECT_WRONG = LabelScheme(
    "CORRECT/WRONG",
    {"correct": 1.0, "wrong": 0.0, "incorrect": 0.0},
    negatable=True,
    echoes=(
        r"\b(?:in)?correct\s*(?:/|\bor\b|\band/or\b|\|)\s*(?:wrong|incorrect|not)\b",
        r"\b(?:wrong|incorrect)\s*(?:/|\bor\b|\|)\s*correct\b",
        r"\b(?:correct|wrong|incorrect)[\"'”’]?\s*(?:if|when|only\s+if|unless|otherwise)\b",
        r"\b(?:label(?:led|ed)?|mark(?:ed)?)\s+(?:it\s+)?(?:as\s+)?[\"'“‘]?(?:CORRECT|WRONG)"
        r"[\"'”’]?\s+(?:if|when)\b",
        r"\b(?:correct|wrong|incorrect)\s+(?=(?:answer|response|one|date|city|name|year|"
        r"month|day|number|value|information|fact|details?|label|verdict|option|choice|"
        r"person|place|time|location|amount|count|spelling|format|word|reply|gold)\b)",
        r"\bthe\s+(?:correct|right)\b",
    ),
    ask="the single word CORRECT or WRONG",
)


def _label_statements(reply: _Reply, scheme: LabelScheme) -> list[Statement]:
    statements = []
    for start, end, obj in reply.objects:
        value = _label_in_object(obj, scheme)
        if value is not None:
            statements.append(Statement(start, end, FINAL, value))
    for match in scheme.word_pattern().finditer(reply.blank):
        found = _label_statement(reply, scheme, match)
        if found is not None:
            statements.append(found)
    return _overruled(reply, sorted(statements, key=lambda s: s.start))


def _label_statement(reply: _Reply, scheme: LabelScheme, match: re.Match) -> Statement | None:
    word = match.group(1)
    value = scheme.words[word.lower()]
    line_head, line_tail = reply.line_around(match.start(), match.end())
    before, after, mark = reply.sentence_around(match.start(), match.end())
    clause = re.split(r"[,;:()\u2014\u2013]|\s-\s", before)[-1]
    negated = False
    if scheme.negatable:
        window = before[-40:]
        negated = bool(_NEGATION.search(window)) and not _NOT_ONLY.search(window)
    if negated:
        value = 1.0 - value
    alone = _TRAIL_ONLY.match(line_tail) is not None
    labelled = _LABELLED_PREFIX.match(line_head) or _LABELLED_PREFIX.match(before)
    bold = re.search(r"(\*\*|__)\s*(?:not\s+)?$", before, re.I) and re.match(
        r"\s*[.!]?(\*\*|__)", after
    )
    upper = word.isupper() and len(word) > 3
    if labelled and (alone or scheme is CORRECT_WRONG or _starts_clause(after)):
        rank = FINAL if labelled.group("final") else LABELLED
    elif _ONLY_MARKUP.match(line_head) and alone:
        rank = LABELLED
    elif bold or upper:
        rank = LABELLED
    elif _PHRASE.search(before[-60:]):
        rank = PHRASED
    elif _free(scheme, word, before, after, clause):
        rank = FREE
    else:
        return None
    hedged = _hedged(before, clause, mark, rank)
    if re.search(r"\bnot\s+(?:yet|sure)\b", clause, re.I) or (
        scheme.negatable and _PARTIAL.search(before[-30:])
    ):
        hedged = True
    return Statement(match.start(), match.end(), rank, value, hedged)


def _starts_clause(after: str) -> bool:
    return bool(re.match(r"^\s*(?:[.!,;:)\-–—*_`\"'”’]|$)", after))


def _free(scheme: LabelScheme, word: str, before: str, after: str, clause: str) -> bool:
    """Whether a word outside any label or phrase states the verdict."""
    if scheme is YES_NO:
        at_start = not clause.strip(" *_`\"'“”‘’")
        punctuated = _starts_clause(after)
        if word.lower() == "no" and not punctuated and _DETERMINER_NEXT.match(after):
            return False  # "no date is given", "No mention of ..."
        return punctuated or at_start
    # CORRECT / WRONG in lower case: only as a predicate ("is correct", "isn't wrong", "nothing
    # wrong") or a sentence of its own ("Correct, it names the city.")
    if _PREDICATE.search(before[-60:]):
        return True
    return not clause.strip(" *_`\"'“”‘’") and _starts_clause(after)


def _label_in_object(obj: Any, scheme: LabelScheme, depth: int = 0) -> float | None:
    """A label under a verdict key of a JSON object (or of one nested one)."""
    if not isinstance(obj, dict) or depth > 1:
        return None
    for key, value in obj.items():
        name = str(key).lower().replace("-", "_")
        if name in ("label", "verdict", "answer", "judgement", "judgment", "decision", "result",
                    "final_answer", "final_verdict", "grade", "correctness", "is_correct",
                    "correct"):  # fmt: skip
            if isinstance(value, bool) and name in ("is_correct", "correct", "correctness"):
                return 1.0 if value else 0.0
            if isinstance(value, str):
                word = value.strip(" .!*`\"'").lower()
                if word in scheme.words:
                    return scheme.words[word]
        if isinstance(value, dict):
            found = _label_in_object(value, scheme, depth + 1)
            if found is not None:
                return found
    return None


def read_label(text: str, scheme: LabelScheme) -> float:
    """The value of the reply's final explicit label under ``scheme``; else UnparseableReply."""
    reply = _Reply(text, [re.compile(p, re.IGNORECASE) for p in scheme.echoes])
    return _decide(_label_statements(reply, scheme), scheme.name, scheme.ask)


def yes_no(text: str) -> float:
    """1.0 for yes, 0.0 for no."""
    return read_label(text, YES_NO)


def correct_wrong(text: str) -> float:
    """1.0 for CORRECT, 0.0 for WRONG (or INCORRECT)."""
    return read_label(text, CORRECT_WRONG)


def json_label(text: str, key: str, labels: dict[str, float], scheme: LabelScheme) -> float:
    """The label under ``key`` of the reply's JSON object(s); a reply without one is read as
    ``scheme`` text (a judge asked for ``{"label": "CORRECT"}`` that writes "CORRECT")."""
    reply = _Reply(text, [re.compile(p, re.IGNORECASE) for p in scheme.echoes])
    found = set()
    for _, _, obj in reply.objects:
        for name, value in obj.items():
            if str(name).lower() == key.lower():
                word = str(value).strip(" .!*`\"'").lower()
                if word not in {k.lower() for k in labels}:
                    raise UnparseableReply(
                        f"{key} {value!r} is not one of {sorted(labels)}; reply with only "
                        f"{scheme.ask}"
                    )
                found.add(next(v for k, v in labels.items() if k.lower() == word))
    if len(found) > 1:
        raise UnparseableReply(f"its JSON states both verdicts; reply with only {scheme.ask}")
    if found:
        return found.pop()
    return _decide(_label_statements(reply, scheme), scheme.name, scheme.ask)


def json_field(text: str, key: str) -> Any:
    """The value under ``key`` of the reply's JSON object(s) (fenced, bare, or among prose; a
    thinking block dropped); several objects must agree."""
    found = [
        obj[name]
        for _, _, obj in _json_objects(strip_reasoning(str(text or "")))
        for name in obj
        if str(name).lower() == key.lower()
    ]
    distinct = {json.dumps(value, sort_keys=True) for value in found}
    if len(distinct) != 1:
        what = "no JSON object" if not found else "JSON objects that disagree"
        raise UnparseableReply(f"it holds {what} with {key!r}; reply with only the JSON object")
    return found[-1]


# ---- numeric scores ----------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)(?![\w]|\.\d)")
_SCORE_KEY = re.compile(
    r"\b(?P<final>(?:final|overall|total)\s+)?(?:score|rating|grade|overall)"
    r"(?:\s+of\s+the\s+\w+)?\s*[*_`]*\s*[:=]\s*[*_`\"'“‘(\[]*\s*$",
    re.IGNORECASE,
)
_SCORE_KEYS = ("score", "rating", "final_score", "overall_score", "grade", "overall")
_CONNECTIVE = re.compile(
    r"^\s*(?:$|[.!,;:)\]*_`\"'”’\-–—]|\(|because|since|as|for|due|given|the|this|it|overall|"
    r"but|and|with|—|i\b|\n)",
    re.IGNORECASE,
)


def _score_statements(reply: _Reply, low: int, high: int) -> list[Statement]:
    statements = []
    for start, end, obj in reply.objects:
        for name, value in obj.items():
            if str(name).lower() in _SCORE_KEYS and not isinstance(value, bool | dict | list):
                statements.append(Statement(start, end, FINAL, _number(value)))
    for match in _NUMBER.finditer(reply.blank):
        found = _score_statement(reply, match, low, high)
        if found is not None:
            statements.append(found)
    return _overruled(reply, sorted(statements, key=lambda s: s.start))


def _number(value: Any) -> float | str:
    try:
        return float(str(value).strip())
    except ValueError:
        return str(value)


def _score_statement(reply: _Reply, match: re.Match, low: int, high: int) -> Statement | None:
    number = float(match.group(1))
    line_head, line_tail = reply.line_around(match.start(), match.end())
    before, after, mark = reply.sentence_around(match.start(), match.end())
    clause = re.split(r"[,;()\u2014\u2013]|\s-\s", before)[-1]
    # the scale itself, a fraction's denominator, a list's number: no score
    if re.search(r"(?:/|\bout\s+of|\bscale\s+(?:of|from)|\bfrom|\bbetween|\brange)\s*$", before,
                 re.I) or re.match(r"\s*(?:-|–|to|through|and)\s*\d", line_tail):  # fmt: skip
        return None
    if re.search(r"\d\s*(?:-|–|to|and)\s*$", before, re.I):
        return None
    fraction = re.match(r"\s*(?:/|out\s+of)\s*(\d+)", line_tail, re.I)
    if fraction and int(fraction.group(1)) != high:
        return None
    tail = line_tail[fraction.end() :] if fraction else line_tail
    if not line_head.strip() and re.match(r"\.\s+\w", line_tail) and not fraction:
        # "1. Relevance: ..." is a list's number; a reply that starts "4. The answer ..." is a
        # score only when it is the reply's first line
        if reply.blank[: match.start()].strip():
            return None
    labelled = _LABELLED_PREFIX.match(line_head) or _SCORE_KEY.search(before)
    alone = _TRAIL_ONLY.match(tail.split("\n")[0]) is not None
    last = not reply.blank[match.end() :].strip(" \n*_`\"'”’.!)]") or (
        fraction and not tail.strip(" \n*_`\"'”’.!)]")
    )
    bold = re.search(r"(\*\*|__)$", before) and re.match(r"\s*(?:/\s*\d+)?\s*(\*\*|__)", line_tail)
    if labelled:
        rank = FINAL if labelled.group("final") else LABELLED
    elif _ONLY_MARKUP.match(line_head) and (alone or fraction):
        rank = LABELLED if reply.blank[: match.start()].strip() else PHRASED
    elif bold:
        rank = LABELLED
    elif re.search(
        r"\b(?:rate|rated|rating|score|scored|scoring|give|gives|giving|assign|assigning|award|"
        r"deserves?|merits?|earns?|grade|graded|mark|worth)\b(?:\s+[a-z'’]+){0,5}[\s:*]*$",
        before,
        re.I,
    ):
        rank = PHRASED
    elif fraction and _CONNECTIVE.match(tail):
        rank = PHRASED
    elif re.search(r"\b(?:so|thus|hence|therefore|overall|finally|i\s+(?:go\s+with|settle\s+on|"
                   r"choose))\s*[:,]?\s*(?:a\s+|an\s+)?$", before, re.I):  # fmt: skip
        rank = PHRASED
    elif last and not before.strip(" *_`\"'“‘([") and mark != "?":
        rank = PHRASED  # a sentence of its own that ends the reply: "... from. 3"
    elif not reply.blank[: match.start()].strip() and _CONNECTIVE.match(tail):
        rank = PHRASED  # the reply starts with the number: "4 - mostly complete"
    else:
        return None
    hedged = _hedged(before, clause, mark, rank)
    return Statement(match.start(), match.end(), rank, number, hedged)


def score(text: str, low: int, high: int) -> int:
    """The reply's final explicit score, an integer in ``[low, high]``."""
    reply = _Reply(text, [])
    value = _decide(_score_statements(reply, low, high), "two scores", f"one integer {low}-{high}")
    if isinstance(value, str) or value != int(value) or not low <= value <= high:
        raise UnparseableReply(
            f"its score {value!r} is not an integer {low}-{high}; reply with only one integer "
            f"{low}-{high}"
        )
    return int(value)
