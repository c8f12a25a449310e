"""Offline handler of AMemGym's self-evolution: rewriting the memory-update instructions from a
period's checkpoint feedback.

An honest heuristic that reads only what the feedback gives (never the gold answer or the
required info types, which the assistant is not shown). A question *needs* its topic words (its
content words, minus a few words any advice question uses). Then:

- ``question_only``: every topic word of a question that the memories shown for it do not
  mention becomes a new information type;
- ``complete``: only questions whose chosen option the memories did not support count (no
  answer, or no memory mentions a word that sets the chosen option apart from the others); their
  uncovered topic words become new types, described with the words the options differ on.

A new type is appended as "N. word: ..." unless the section already names it. The offline memory
writer (``memory_organize``) remembers sentences that mention a named type under that type, so an
evolved section changes what gets remembered. No addition: the section comes back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from mnemoflow.lexical import content_words, stems
from mnemoflow.llm.offline import handles
from mnemoflow.llm.offline.writer import section_types

#: Words that any advice question uses and that name no information about the user.
GENERIC = frozenset(
    "best good better way ways make plan plans tips help ideas idea suggest recommend keep get "
    "choose pick start try actually really right now things thing something lately".split()
)


def topic_words(question: str) -> list[str]:
    """A question's content words that could name information about the user, in order."""
    return [w for w in dict.fromkeys(content_words(question)) if len(w) > 2 and w not in GENERIC]


def _supported(item: dict[str, Any], memory: set[str]) -> bool:
    """Whether a memory mentions a word that only the chosen option has (among the options)."""
    letter = item.get("chosen")
    options = item.get("options") or []
    if letter is None:
        return False
    index = ord(letter) - ord("A")
    if not 0 <= index < len(options):
        return False
    others = set().union(*(set(stems(o)) for i, o in enumerate(options) if i != index))
    return bool((set(stems(options[index])) - others) & memory)


def _differences(options: list[str]) -> list[str]:
    """Words some options use and others do not (what the question turns on), first five."""
    per_option = [list(dict.fromkeys(content_words(o))) for o in options]
    shared = set.intersection(*(set(o) for o in per_option)) if per_option else set()
    seen = [w for words in per_option for w in words if w not in shared]
    return list(dict.fromkeys(seen))[:5]


@handles("evolve-memory-types")
def evolve_memory_types(fields: dict[str, Any]) -> str:
    """Fields: variant, memory_types (the section), feedback [{question, memories, options?,
    chosen? (a letter or None)}]. Reply {"new_types", "changes"}."""
    section = fields["memory_types"].rstrip("\n")
    named = {frozenset(words) for _, words in section_types(section)}
    count = len(section_types(section))
    lines, changes = [], []
    for item in fields["feedback"]:
        memory = set(stems(item["memories"]))
        if fields["variant"] == "complete" and _supported(item, memory):
            continue
        for word in topic_words(item["question"]):
            key = frozenset(stems(word))
            if not key or key <= memory or key in named:
                continue
            named.add(key)
            count += 1
            detail = f'needed for "{item["question"].strip()}"'
            if fields["variant"] == "complete":
                differ = _differences(item.get("options") or [])
                if differ:
                    detail += "; the options differ on " + ", ".join(differ)
            lines.append(f"{count}. {word}: what the user says about their {word} ({detail}).")
            changes.append(f"added the type '{word}': no memory mentioned it")
    new = section + ("\n" + "\n".join(lines) if lines else "")
    return json.dumps({"new_types": new, "changes": changes}, ensure_ascii=False)
