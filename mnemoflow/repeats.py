"""``repeats: N``: the run's whole chain once per seed, so a score carries its spread across seeds.

Repeat k (0..N-1) runs with the run seed ``seed + k``. Repeat 0 *is* the run without repeats:
its results stay at ``results/{benchmark}/...`` with the same params, so ``repeats: 1`` (the
default) plans and reruns nothing new and raising N reruns nothing already done. Repeat k >= 1
mirrors the run's tree under ``results/seed{seed + k}/`` (the ``{repeat}`` wildcard of
rules/common.smk is ``""`` or ``seed{S}/``). What a repeat shares with the others instead of
re-running: the prepared data and the AMemGym environment (the benchmark's items; their own
``seed`` knobs make them), and the judge's settings (``judge.seed``, ``judge.repeats``).

The reference models sample through the gateway, whose response cache keys a request by its
sampling parameters and seed: a repeat whose requests equalled repeat 0's would be served repeat
0's replies from the cache. So in repeat k >= 1 every sampling role (:data:`SAMPLING_ROLES`) sends
the seed ``models.<role>.seed + k`` (the run's ``seed + k`` for a role without one): a distinct
request, a new sample at temperature > 0. The judge keeps its own seeds (a repeat's answers differ,
so its judgements do too), the embedder embeds deterministically, and the environment generators
make the shared environment. The offline backend is deterministic: its repeats give the same
replies (under distinct cache keys), so offline repeats show an sd of 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mnemoflow.layout import REPEAT_FOLDER

#: Roles whose replies are samples of the run: the assistant, the simulated user, the memory
#: writer. Not the judge (its own seeds), the embedder (deterministic) nor the generators.
SAMPLING_ROLES = ("agent", "user", "memory_writer")
#: The ``{repeat}`` wildcard of repeat k >= 1, and its pattern (repeat 0's value is empty).
FOLDER = REPEAT_FOLDER
PATTERN = r"(seed\d+/)?"


def repeat_seeds(seed: int, repeats: int) -> list[int]:
    """The run seed of each repeat: ``seed``, ``seed + 1``, ..., ``seed + repeats - 1``."""
    return [seed + k for k in range(repeats)]


def folders(seed: int, repeats: int) -> list[str]:
    """The ``{repeat}`` wildcard of each repeat: ``""`` (repeat 0, today's paths), ``seed{S}/``."""
    return [
        "" if k == 0 else FOLDER.format(seed=s) for k, s in enumerate(repeat_seeds(seed, repeats))
    ]


def folder_seed(folder: str, seed: int) -> int:
    """The run seed of a ``{repeat}`` wildcard (``""``: the run's ``seed``)."""
    found = re.fullmatch(PATTERN, folder)
    if found is None:
        raise ValueError(f"repeat folder {folder!r}: not '' or 'seed<N>/'")
    return int(folder[len("seed") : -1]) if folder else seed


def seeded_models(
    models: Mapping[str, Mapping[str, Any]], run_seed: int, seed: int
) -> dict[str, Any]:
    """The role bindings a job of the repeat with ``run_seed`` calls (``seed``: the config's).

    Repeat 0 (``run_seed == seed``) gets ``models`` unchanged, so its jobs' params are today's.
    Repeat k gets each sampling role's ``seed`` moved on by k: its requests (and their cache keys)
    differ from every other repeat's.
    """
    k = run_seed - seed
    if k == 0:
        return dict(models)
    out = dict(models)
    for role in SAMPLING_ROLES:
        if out.get(role):  # an unbound role ({}) plays the offline default: nothing to seed
            spec = dict(out[role])
            own = spec.get("seed")
            spec["seed"] = (seed if own is None else int(own)) + k
            out[role] = spec
    return out
