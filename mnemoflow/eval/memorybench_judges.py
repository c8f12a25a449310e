"""What produced MemoryBench's judged values, for ``judge.json``: per dataset family, the prompt
version, the role that answered it, the reference's sampling and the role's actual binding.

The gateway samples with the role's binding (``models.judge`` / ``models.critic``), not per call,
so a run whose binding differs from the reference's sampling says so here (``matches_reference``)
instead of silently claiming the paper's setting.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.eval import (
    checklist_judge,
    dialsim_accuracy,
    fusion,
    ideabench,
    jrel,
    judge_doc,
    limitgen,
    nfcats_judge,
    writingbench_critic,
)

#: family -> (prompt version, role, reference sampling, the datasets it scores)
JUDGES: dict[str, tuple[str, str, dict[str, Any], tuple[str, ...]]] = {
    "hellobench_checklist": (
        checklist_judge.PROMPT_VERSION,
        "judge",
        checklist_judge.REFERENCE_SAMPLING,
        (
            "HelloBench-Academic&Knowledge-QA",
            "HelloBench-Academic&Knowledge-Writing",
            "HelloBench-Creative&Design",
        ),
    ),
    "writingbench_critic": (
        writingbench_critic.PROMPT_VERSION,
        writingbench_critic.ROLE,
        writingbench_critic.REFERENCE_SAMPLING,
        (
            "WritingBench-Politics&Law",
            "WritingBench-Academic&Engineering",
            "WritingBench-Creative&Design",
        ),
    ),
    "limitgen": (limitgen.PROMPT_VERSION, "judge", limitgen.REFERENCE_SAMPLING, ("LimitGen-Syn",)),
    "judge_doc_fusion": (
        judge_doc.PROMPT_VERSION,
        "judge",
        fusion.REFERENCE_SAMPLING,
        ("JuDGE",),
    ),
    "ideabench": (ideabench.PROMPT_VERSION, "judge", fusion.REFERENCE_SAMPLING, ("IdeaBench",)),
    "jrel_fusion": (jrel.PROMPT_VERSION, "judge", fusion.REFERENCE_SAMPLING, ("JRE-L",)),
}


def judge_provenance(gateway, families: list[str] | None = None) -> dict[str, Any]:
    """One entry per judge family: prompt version, role binding, reference sampling."""
    bound = gateway.describe()
    out = {}
    for family in families or sorted(JUDGES):
        version, role, reference, datasets = JUDGES[family]
        spec = bound[role]
        differs = {
            key: {"reference": value, "bound": spec.get(key)}
            for key, value in reference.items()
            if spec.get(key) != value
        }
        out[family] = {
            "datasets": list(datasets),
            "prompt_version": version,
            "role": role,
            "model": spec["model"],
            "backend": spec["backend"],
            "reference_sampling": reference,
            "matches_reference": not differs,
            "differs": differs,
        }
    return out


#: Judge tasks of the protocols issue's metrics (prompts fixed by the reference, no version).
PROTOCOL_JUDGES = {"DialSim": dialsim_accuracy.TASK, "NFCats": nfcats_judge.TASK}


def families_of(datasets: list[str]) -> list[str]:
    """The judge families (keys of :data:`JUDGES`) that score any of ``datasets``."""
    return [
        family
        for family, (_, _, _, scored) in sorted(JUDGES.items())
        if any(d in scored for d in datasets)
    ]
