"""Offline memory writer: sentence-level fact extraction and rule-based memory updates.

An honest heuristic, not a language model, and a generic one: it knows what an English
first-person statement about oneself looks like, not how any benchmark words its facts. A *fact*
is a declarative sentence whose grammatical subject is the speaker: once an opening phrase is set
aside, it starts with "I" or "my" ("my favorite color is teal", "I moved to Lisbon"). It is
rewritten to name the speaker ("user's favorite color is teal"). Not facts: questions, requests
("Help me ..."), intentions ("I will ...", "I'd like ..."), and sentences about someone else
("Our neighbour ...").

- Opening phrases without a first-person word, up to a comma, colon or dash ("By the way,",
  "To be honest -"), a sentence adverb ("Honestly", "Anyway") and a reporting clause ("I think
  that", "I should mention") are set aside.
- The *subject* of a fact is what comes before a copula ("is", "are", "has been", "has changed
  to", ...) and its *value* what follows, without a trailing afterthought (", funny enough",
  ", I guess") or time adverbial ("these days", "at the moment"). A statement with no copula
  ("I moved to Lisbon") has no subject: it is added, never used to overwrite another.
- Possessives keep their owner: "my roommate's job is nurse" has the subject "user's roommate's
  job", a fact about the roommate that never overwrites the user's own job.

Memory decisions compare subjects: same subject and same value -> NONE, same subject and a new
value -> UPDATE (the newer statement wins), a negated statement ("no longer", "not ... anymore")
about a subject -> DELETE, anything else -> ADD.

Replies follow the JSON contracts in ``mnemoflow/memory/writer.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mnemoflow.lexical import content_words, sentences, stems
from mnemoflow.llm.offline import handles

#: How a statement about oneself opens: the speaker as subject, or something the speaker has.
SELF_SUBJECT = re.compile(r"^(?:i|i'm|i've|i was|my|mine)\b", re.IGNORECASE)
#: First-person words anywhere: an opening phrase holding one is part of the statement.
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)
#: Intentions, wishes and offers ("I will", "I'd like", "I can"): not facts about oneself.
INTENTION = re.compile(
    r"^i(?:'ll|'d| will| would| can| could| shall| should| might| may| want| wish| hope)\b",
    re.IGNORECASE,
)
#: "I think (that)", "I should mention (that)": the statement is the clause that follows.
REPORTING = re.compile(
    r"^i\s+(?:(?:really\s+)?(?:think|guess|believe|suppose|feel|mean|reckon|realized|noticed)"
    r"|(?:should|must|have to|forgot to|want to|wanted to)\s+(?:mention|say|add|admit|tell you)"
    r")(?:\s+that)?[,:]?\s+",
    re.IGNORECASE,
)
#: An opening phrase set aside before the statement: a few words and a comma, colon or dash.
OPENING = re.compile(r"^([^,:;\u2014-]{1,40}?)\s*(?:[,:;\u2014]|\s-\s)\s*")
#: A lone sentence adverb at the start ("Honestly my ...", "Anyway I ...").
ADVERB = re.compile(r"^(?:\w+ly|anyway|also|so|well|oh|yes|yeah|ok|okay)\s+", re.IGNORECASE)
COPULA = re.compile(
    r"\s(?:has changed to|have changed to|changed to|has become|have become|has been|have been|"
    r"is now|are now|is still|are still|became|remains|remain|is|are|was|were)\s",
    re.IGNORECASE,
)
NEGATION = re.compile(r"\b(no longer|not anymore|anymore|don't have|do not have|stopped)\b", re.I)
#: A trailing afterthought after a comma, or a time adverbial, is not part of a value.
TRAILING = re.compile(
    r"(?:,\s*[^,]*$)|\s+(?:these days|nowadays|now|currently|at the moment|at present|"
    r"right now|for now|lately|recently|anymore)\s*$",
    re.IGNORECASE,
)
#: Words that only date a statement; dropped from subjects so "is now X" matches "is X".
TIME_WORDS = frozenset({"now", "currently", "nowadays", "today", "still"})


def statement(sentence: str) -> str | None:
    """The first-person statement in ``sentence`` with its opening set aside, or ``None``."""
    text = sentence.strip()
    if not text or text.endswith("?"):
        return None
    for _ in range(3):  # "Anyway, honestly, I think that my ..."
        before = text
        match = OPENING.match(text)
        if match and not FIRST_PERSON.search(match.group(1)) and len(match.group(1).split()) <= 5:
            text = text[match.end() :]
        text = ADVERB.sub("", text, count=1)
        text = REPORTING.sub("", text, count=1)
        if text == before:
            break
    if not SELF_SUBJECT.match(text) or INTENTION.match(text):
        return None
    return text


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
            core = statement(sentence)
            if core is None or len(content_words(core)) < 2:
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


#: A type of the organizer's section: "3. Plans and Intentions: ..." or "- diet: ...".
SECTION_TYPE = re.compile(r"^\s*(?:\d+[.)]|[-*])\s*([^:\n]{1,60}):", re.MULTILINE)


def section_types(memory_types: str) -> list[tuple[str, frozenset[str]]]:
    """(name, stems of its content words) of every type the section names."""
    out = []
    for match in SECTION_TYPE.finditer(memory_types or ""):
        name = match.group(1).strip()
        words = frozenset(stems(name))
        if name and words:
            out.append((name, words))
    return out


@handles("memory_organize")
def organize(fields: dict[str, Any]) -> str:
    """Fields as memory_kv_update plus memory_types (the "Types of Information to Remember"
    section). Reply the flat {key: value} dict of the first-person facts (no deletes), and, for
    every type the section names, the latest user sentence that mentions all of that type's
    words, under the type's name: what the section asks to track is remembered even when it is
    not said as "my X is Y". The seven broad default categories have long names that ordinary
    sentences do not spell out; a type an evolution added ("stress", "weekends") is matched."""
    changes = json.loads(kv_update(fields))
    reply = {s["key"]: s["value"] for s in changes["set"]}
    types = section_types(fields.get("memory_types", ""))
    for message in fields["messages"]:
        if message.get("role") != "user":
            continue
        for sentence in sentences(message["content"]):
            if sentence.startswith("[Current Time:") or sentence.rstrip().endswith("?"):
                continue
            words = set(stems(sentence))
            for name, needed in types:
                if needed <= words:
                    reply[name] = sentence.strip()
    return json.dumps(reply, ensure_ascii=False)


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
