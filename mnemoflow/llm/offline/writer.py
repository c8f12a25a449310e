"""Offline memory writer: sentence-level fact extraction and rule-based memory updates.

An honest heuristic, not a language model. A "fact" is a declarative first-person sentence of a
message ("my favorite color is teal", "I moved to Lisbon"), rewritten to name the speaker
("user's favorite color is teal"). Its *subject* is what comes before the copula ("is", "are",
"has changed to", ...) and its *value* what comes after. Memory decisions compare subjects:
same subject and same value -> NONE, same subject and a new value -> UPDATE (the newer statement
wins), a negated statement ("no longer", "not ... anymore") about a subject -> DELETE, anything
else -> ADD. Hard negatives keep their own subject ("user's sister's favorite color"), so they
never overwrite the user's own value.

Replies follow the JSON contracts in ``mnemoflow/memory/writer.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.lexical import content_words, sentences
from mnemoflow.llm.offline import handles

FIRST_PERSON = re.compile(
    r"\b(my|mine|i'm|i am|i've|i have|i had|i was|i live|i work|i moved|i love|i like|i hate|"
    r"i prefer|i went|i got|i started|i bought|i adopted|i joined|i play|i no longer|i don't)\b",
    re.IGNORECASE,
)
COPULA = re.compile(
    r"\s(?:has changed to|have changed to|changed to|is now|are now|has become|became|is|are|"
    r"was|were)\s",
    re.IGNORECASE,
)
NEGATION = re.compile(r"\b(no longer|not anymore|anymore|don't have|do not have|stopped)\b", re.I)
LEADING_THAT = re.compile(r"^(?:i\s+\w+(?:\s+\w+)?\s+that\s+)", re.IGNORECASE)
TRAILING = re.compile(r"(?:,\s*[^,]*$)|\s+(?:these days|now|nowadays)\s*$", re.IGNORECASE)
#: Words that only date a statement; dropped from subjects so "is now X" matches "is X".
TIME_WORDS = frozenset({"now", "currently", "nowadays", "today", "still"})


def _strip_lead(sentence: str) -> str:
    """Drop a lead-in without first person ("By the way, ", "Update: ", "I should say that")."""
    sentence = sentence.strip()
    for sep in (":", ","):
        head, found, tail = sentence.partition(sep)
        if found and len(head.split()) <= 4 and not FIRST_PERSON.search(head) and tail.strip():
            if FIRST_PERSON.search(tail):
                sentence = tail.strip()
    return LEADING_THAT.sub("", sentence)


def _third_person(sentence: str, speaker: str) -> str:
    name = speaker or "user"
    out = re.sub(r"\bmy\b", f"{name}'s", sentence, flags=re.IGNORECASE)
    out = re.sub(r"\bmine\b", f"{name}'s", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi'm\b|\bi am\b", f"{name} is", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi've\b", f"{name} has", out, flags=re.IGNORECASE)
    out = re.sub(r"\bi\b", name, out, flags=re.IGNORECASE)
    out = re.sub(r"\bme\b", name, out, flags=re.IGNORECASE)
    return out[0].upper() + out[1:] if out else out


def extract(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Facts of numbered message records: [{text, from: [n]}], in message order."""
    facts = []
    for record in records:
        for sentence in sentences(record["content"]):
            if sentence.endswith("?") or not FIRST_PERSON.search(sentence):
                continue
            core = _strip_lead(sentence)
            if len(content_words(core)) < 2:
                continue
            facts.append({"text": _third_person(core, record["speaker"]), "from": [record["n"]]})
    return facts


def split_fact(text: str) -> tuple[frozenset[str], str]:
    """(subject words, value) of a fact; the subject is empty when there is no copula."""
    match = COPULA.search(text)
    if not match:
        return frozenset(), text.strip()
    subject = frozenset(w for w in content_words(text[: match.start()]) if w not in TIME_WORDS)
    if len(subject) < 2:  # "User is tired": the speaker alone is no attribute
        return frozenset(), text.strip()
    value = TRAILING.sub("", text[match.end() :].strip().rstrip(".!")).strip()
    return subject, value


def _bare(words) -> set[str]:
    """Words without possessive endings ("user's" -> "user")."""
    return {w.removesuffix("'s") for w in words}


def _negates(fact: str, subject: frozenset[str], value: str) -> bool:
    """A negated fact hits a memory whose attribute or value words it all mentions.

    "User no longer drives the Civic" negates "User's car model is Civic" through the value.
    """
    words = _bare(content_words(fact))
    attribute = _bare(subject) - _bare(content_words(fact.split()[0] if fact.split() else ""))
    value_words = _bare(content_words(value)) if subject else set()
    return bool(attribute and attribute <= words) or bool(value_words and value_words <= words)


def _same_value(a: str, b: str) -> bool:
    return set(content_words(a)) == set(content_words(b))


@handles("memory_extract_facts")
def extract_facts(fields: dict[str, Any]) -> str:
    """Fields: messages [{n, speaker, role, time, content}]."""
    return json.dumps({"facts": extract(fields["messages"])}, ensure_ascii=False)


@handles("memory_update_facts")
def update_facts(fields: dict[str, Any]) -> str:
    """Fields: facts [{text}], memories [{id, text}] (most similar stored facts)."""
    memories = [(m["id"], m["text"], split_fact(m["text"])) for m in fields["memories"]]
    decided: list[dict[str, Any]] = []
    by_subject: dict[frozenset[str], int] = {}  # subject -> index in decided (latest wins)
    touched: set[str] = set()
    for index, fact in enumerate(f["text"] for f in fields["facts"]):
        subject, value = split_fact(fact)
        negated = bool(NEGATION.search(fact))
        if subject and subject in by_subject:
            # A later fact in the same batch about the same subject supersedes the earlier one.
            earlier = decided[by_subject[subject]]
            if earlier["event"] in ("ADD", "UPDATE"):
                earlier.update(text=fact, fact=index)
                if negated and earlier["event"] == "ADD":
                    earlier["event"] = "NONE_DROP"
                continue
        if negated:
            matches = [
                (mid, mtext, mvalue)
                for mid, mtext, (msubject, mvalue) in memories
                if mid not in touched and _negates(fact, msubject, mvalue)
            ]
        else:
            matches = [
                (mid, mtext, mvalue)
                for mid, mtext, (msubject, mvalue) in memories
                if mid not in touched
                and (
                    (subject and msubject == subject)
                    or (not subject and set(content_words(mtext)) == set(content_words(fact)))
                )
            ]
        if not matches:
            if negated:
                continue
            event = {"event": "ADD", "text": fact, "fact": index}
        else:
            mid, mtext, mvalue = matches[-1]
            touched.add(mid)
            if negated:
                event = {"event": "DELETE", "id": mid, "fact": index}
            elif _same_value(mvalue, value):
                event = {"event": "NONE", "id": mid, "fact": index}
            else:
                event = {"event": "UPDATE", "id": mid, "text": fact, "fact": index}
            for other, _, _ in matches[:-1]:  # duplicates of the same subject
                touched.add(other)
                decided.append({"event": "DELETE", "id": other, "fact": index})
        if subject:
            by_subject[subject] = len(decided)
        decided.append(event)
    return json.dumps(
        {"memory": [e for e in decided if e["event"] != "NONE_DROP"]}, ensure_ascii=False
    )


def kv_pair(fact_text: str) -> tuple[str, str]:
    """Key and value of a fact: "user's favorite color" -> "teal"; no copula: first words."""
    match = COPULA.search(fact_text)
    if match:
        key = " ".join(w for w in content_words(fact_text[: match.start()]) if w not in TIME_WORDS)
        value = TRAILING.sub("", fact_text[match.end() :].strip().rstrip(".!")).strip()
        if len(key.split()) >= 2 and value:
            return key, value
    words = content_words(fact_text)
    return " ".join(words[:3]), fact_text.strip().rstrip(".")


@handles("memory_kv_update")
def kv_update(fields: dict[str, Any]) -> str:
    """Fields: memory [{key, value, time}], messages [{n, speaker, role, time, content}]."""
    existing = {frozenset(content_words(m["key"])): m["key"] for m in fields["memory"]}
    values = {m["key"]: m["value"] for m in fields["memory"]}
    sets: dict[str, dict[str, Any]] = {}
    deletes: list[str] = []
    for fact in extract(fields["messages"]):
        key, value = kv_pair(fact["text"])
        key = existing.get(frozenset(content_words(key)), key)
        if NEGATION.search(fact["text"]):
            for old_key, old_value in values.items():
                if old_key not in deletes and _negates(
                    fact["text"], frozenset(content_words(old_key)), old_value
                ):
                    deletes.append(old_key)
                    sets.pop(old_key, None)
            continue
        sets.pop(key, None)  # re-insert so the latest statement comes last
        sets[key] = {"key": key, "value": value, "from": fact["from"]}
    return json.dumps({"set": list(sets.values()), "delete": deletes}, ensure_ascii=False)


@handles("memory_organize")
def organize(fields: dict[str, Any]) -> str:
    """Fields as memory_kv_update; reply the flat {key: value} dict of the sets (no deletes)."""
    changes = json.loads(kv_update(fields))
    return json.dumps({s["key"]: s["value"] for s in changes["set"]}, ensure_ascii=False)


@handles("memory_note")
def note(fields: dict[str, Any]) -> str:
    """Fields: content, speaker, time. Keywords: longest distinct content words, in text order."""
    words = list(dict.fromkeys(content_words(fields["content"])))
    ranked = sorted(range(len(words)), key=lambda i: (-len(words[i]), i))[:5]
    keywords = [words[i] for i in sorted(ranked)]
    content = fields["content"].strip()
    if content.endswith("?"):
        tags = ["question"]
    elif extract([{"n": 1, "speaker": fields["speaker"], "content": content}]):
        tags = ["personal-fact"]
    else:
        tags = ["chat"]
    first = (sentences(content) or [content])[0]
    context = f"{fields['speaker']} says: {first}"[:200]
    return json.dumps({"keywords": keywords, "tags": tags, "context": context}, ensure_ascii=False)
