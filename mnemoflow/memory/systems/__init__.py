"""Built-in memory systems: importing this package registers each one by name (the product
adapters too: they import their product only when a system is built)."""

from mnemoflow.memory.products import (  # noqa: F401, E402  (registration)
    a_mem,
    graphiti,
    langmem,
    mem0_paper,
    memoryos,
)
from mnemoflow.memory.systems import (  # noqa: F401  (registration)
    agentic_external,
    agentic_incontext,
    bm25,
    dense,
    full_context,
    imported,
    none,
    notes_linked,
    rag,
    tiered,
)
