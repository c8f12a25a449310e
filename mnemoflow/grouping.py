"""Random grouping of names, shared by the procedural AMemGym generator (``data``) and the offline
backend's environment handlers (``llm``), which must cut a user's attributes into the same kind of
groups and may not import each other.
"""

from __future__ import annotations

import random


def shuffled_groups(rng: random.Random, names: list[str], largest: int) -> list[list[str]]:
    """``names`` shuffled and cut into consecutive groups of 1..``largest`` (sizes drawn from
    ``rng``); every name lands in exactly one group."""
    names = list(names)
    rng.shuffle(names)
    groups = []
    while names:
        size = rng.randint(1, min(largest, len(names)))
        groups.append(names[:size])
        names = names[size:]
    return groups
