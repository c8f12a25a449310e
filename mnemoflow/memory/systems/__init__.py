"""Built-in memory systems; importing this package registers each of them by name."""

from mnemoflow.memory.systems import bm25, full_context, none  # noqa: F401
