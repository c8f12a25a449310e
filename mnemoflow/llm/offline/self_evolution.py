"""Offline handler of AMemGym's self-evolution: rewriting the memory-update instructions from a
period's checkpoint feedback."""
