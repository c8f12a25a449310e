"""MemoryBench and the feedback protocols' item metrics: one class per metric family, the
paper's and the judge scoring protocols, normalization, re-scoring stored predictions."""
