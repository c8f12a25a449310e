"""The memory products on LoCoMo (offline), as any built-in system: each reads a locomo10.json
sample through the LoCoMo loader (two human speakers, dated sessions), is built by static QA's
ingest, answers from its snapshot, and ranks the evidence turn of a single-hop question first.

The products' extras are installed by ``make test`` (install-test), so these tests never skip.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from mnemoflow.data.registry import load_benchmark
from mnemoflow.llm.gateway import Gateway
from mnemoflow.protocols import static_qa
from mnemoflow.protocols.step import StepContext
from tests.paper_standins import locomo_samples
from tests.products_fixtures import PRODUCTS


@pytest.fixture(scope="module")
def locomo(tmp_path_factory):
    path = tmp_path_factory.mktemp("locomo") / "locomo10.json"
    path.write_text(json.dumps(locomo_samples()), encoding="utf-8")
    return load_benchmark({"loader": "locomo", "source": {"path": str(path)}})


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_a_product_ranks_a_locomo_questions_evidence(name, locomo, tmp_path):
    # LoCoMo's two speakers are both users to the memory (docs/memory.md, speaker_roles)
    # top 1 of the sample's four turns: the evidence must rank first, not merely be held
    system = {**PRODUCTS[name], "top_k": 1}
    if "mem0" in name:
        system["speaker_roles"] = "all_user"
    gateway = Gateway.from_config({}, None)
    episodes = sorted(set(locomo.episode_sessions.episode_id))
    last = int(locomo.questions.checkpoint.max())
    keys = {"benchmark": "locomo", "system": name, "protocol": "qa", "step": last}
    previous = None
    for step in range(last + 1):
        snapshot = tmp_path / f"step{step}"
        asyncio.run(
            static_qa.ingest(locomo.sessions, locomo.episode_sessions, episodes,
                             StepContext(system, gateway), step, previous, snapshot)
        )  # fmt: skip
        previous = snapshot
    ctx = StepContext(system, gateway, keys)
    answers = asyncio.run(static_qa.answer(locomo.questions, previous, ctx))
    ranked = answers.set_index("question_id")["ranked_ids"]
    asked = locomo.questions.set_index("question_id")
    single_hop = asked.index[asked.question.str.startswith("Where did Melanie paint")][0]
    evidence = list(asked.loc[single_hop, "evidence_ids"])
    assert evidence and evidence[0] in list(ranked[single_hop]), (name, list(ranked[single_hop]))
