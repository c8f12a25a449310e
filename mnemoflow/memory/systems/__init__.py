"""Built-in memory systems: importing this package registers each one by name."""

from mnemoflow.memory.systems import (  # noqa: F401  (registration)
    agentic_external,
    agentic_incontext,
    bm25,
    dense,
    full_context,
    none,
    notes_linked,
    rag,
    tiered,
)
