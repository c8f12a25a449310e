"""Each memory product in a tiny workflow run (offline): the synthetic benchmark's one user,
three sessions; the product's memory finds the evidence and its model calls are in the ledger.

The products' extras are installed by ``make test`` (install-test), so these tests never skip.
"""

from __future__ import annotations

import pytest

from tests import products_fixtures as pf

#: system -> (its definition, or None for the default config's; tasks its ingest must call)
WORKFLOW = {
    "a_mem": ({"type": "a_mem", "top_k": 5}, ("a_mem_analyze", "a_mem_evolve")),
    # a short-term memory of 2 pairs, so that the tiny episode reaches mid-term memory
    "memoryos": (
        {"type": "memoryos", "top_k": 5, "short_term_capacity": 2},
        ("memoryos_continuity", "memoryos_multi_summary"),
    ),
    "mem0_paper": (None, ("mem0_extract_facts", "mem0_update_memory")),
    "graphiti": (None, ("graphiti.extract_nodes.extract_message", "graphiti.extract_edges.edge")),
    "langmem": (None, ("langmem_manage_memories",)),
}


@pytest.mark.slow
@pytest.mark.parametrize("system", sorted(WORKFLOW))
def test_a_workflow_runs_a_product_on_the_synthetic_benchmark(system, tmp_path):
    spec, tasks = WORKFLOW[system]
    micro, ledger = pf.run_synthetic_workflow(tmp_path, system, spec)
    assert micro["turn_evidence_recall"] > 0.5 and micro["accuracy"] > 0.5, micro
    for task in tasks:
        assert ledger[f"memory_writer/{task}"]["calls"] > 0, task
