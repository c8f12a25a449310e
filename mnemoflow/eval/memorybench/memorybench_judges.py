"""What produced MemoryBench's judged values, for ``judge.json``: per dataset family, the prompt
version, the role that answered it, the reference's sampling and the role's actual binding.

The gateway samples with the role's binding (``models.judge`` / ``models.critic``), not per call,
so a run whose binding differs from the reference's sampling says so here (``matches_reference``)
instead of silently claiming the paper's setting.
"""

from __future__ import annotations

from typing import Any

from mnemoflow.eval.memorybench.memorybench_metrics import FAMILIES, FamilyJudge


def _families() -> list[Any]:
    return [FAMILIES.get(name) for name in FAMILIES.names()]


def judges() -> dict[str, FamilyJudge]:
    """The judges behind the families' values (each family states its own), by name."""
    return {f.judge.name: f.judge for f in _families() if f.judge is not None}


def judge_provenance(gateway, families: list[str] | None = None) -> dict[str, Any]:
    """One entry per judge family: prompt version, role binding, reference sampling."""
    bound = gateway.describe()
    known = judges()
    out = {}
    for family in families or sorted(known):
        judge = known[family]
        spec = bound[judge.role]
        differs = {
            key: {"reference": value, "bound": spec.get(key)}
            for key, value in judge.reference_sampling.items()
            if spec.get(key) != value
        }
        out[family] = {
            "datasets": list(judge.datasets),
            "prompt_version": judge.prompt_version,
            "role": judge.role,
            "model": spec["model"],
            "backend": spec["backend"],
            "reference_sampling": judge.reference_sampling,
            "matches_reference": not differs,
            "differs": differs,
        }
    return out


#: Judge tasks of the protocols issue's metrics (prompts fixed by the reference, no version), by
#: metric family.
PROTOCOL_JUDGES = {f.name: f.judge_task for f in _families() if f.judge_task}


def families_of(datasets: list[str]) -> list[str]:
    """The judge families (keys of :func:`judges`) that score any of ``datasets``."""
    return [
        name
        for name, judge in sorted(judges().items())
        if any(d in judge.datasets for d in datasets)
    ]
