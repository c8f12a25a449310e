"""What every protocol step carries: the memory system's spec, the run's keys, the gateway, the
seed and the progress callback, as one frozen object.

A step of any family builds (or loads) its memories from the same three things (spec, gateway,
seed), labels its rows with the run's keys and ticks the job's progress bar; passing them one by
one made every step function's signature a dozen names long. The context only carries them: what
a step computes, and every model call's cache key, are the same as when they were passed apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemoflow.memory.base import MemorySystem, build

#: The per-item progress callback a job passes (its argument: the item's cache hit, or None).
Progress = Callable[[bool | None], None]


@dataclass(frozen=True)
class StepContext:
    """One step's system spec, run keys (the tables' run-key columns), gateway, seed and progress.

    ``keys`` may be empty for a step whose rows carry no run keys (a snapshot's ingest).
    """

    system_spec: dict[str, Any]
    gateway: Any
    keys: dict[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    progress: Progress | None = None

    def build(self) -> MemorySystem:
        """A new, empty memory of the step's system."""
        return build(self.system_spec, llm=self.gateway, seed=self.seed)

    def load(self, folder: Path | str) -> MemorySystem:
        """The step's system with the memory saved in ``folder``."""
        memory = self.build()
        memory.load(Path(folder))
        return memory

    def tick(self, cache_hit: bool | None) -> None:
        """One item done (its cache hit, or None for an item of many calls)."""
        if self.progress:
            self.progress(cache_hit)

    def with_spec(self, system_spec: dict[str, Any]) -> StepContext:
        """This step with another spec (``static_qa.snapshot_system``: a snapshot's whole one)."""
        return dataclasses.replace(self, system_spec=system_spec)
