"""The memory products on MemoryBench's protocols (offline), as any built-in system: off-policy,
each product memorizes the simulated user's corrections of the training dialogues, and its
memory answers the test split better than no memory at all.

The products' extras are installed by ``make test`` (install-test), so these tests never skip.
"""

from __future__ import annotations

import asyncio

import pytest

from mnemoflow.protocols import feedback as fb
from mnemoflow.protocols.step import StepContext
from tests.products_fixtures import PRODUCTS
from tests.test_protocols_feedback import (  # noqa: F401  (gateway, tiny: fixtures)
    METRICS,
    NO_SESSIONS,
    gateway,
    generated,
    keys,
    tiny,
)


def off_policy_accuracy(system, tiny, gateway, train, folder):  # noqa: F811 (fixture names)
    """Memorize every training dialogue (one off-policy step), answer and score the test split."""
    config = fb.FeedbackConfig()
    run = keys("off_policy", 0, system=system.get("type", "none"))
    asyncio.run(
        fb.ingest_step(
            "off_policy", 0, train, tiny, NO_SESSIONS, StepContext(system, gateway), None, folder
        )
    )
    answers = asyncio.run(
        fb.answer_step(
            "off_policy", tiny, NO_SESSIONS, folder, StepContext(system, gateway, run), config
        )
    )
    scored = asyncio.run(fb.score_step(answers, tiny, train, run, gateway, METRICS, "x"))
    return scored.scores.set_index(["metric", "aggregate"]).value[("accuracy", "micro")]


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_a_product_learns_from_the_users_corrections_off_policy(name, tiny, gateway, tmp_path):  # noqa: F811
    train = generated(tiny, gateway)
    remembered = off_policy_accuracy(PRODUCTS[name], tiny, gateway, train, tmp_path / name)
    forgotten = off_policy_accuracy({"type": "none"}, tiny, gateway, train, tmp_path / "none")
    assert forgotten == 0.0  # the offline assistant knows none of the corrected answers
    assert remembered > forgotten, name
