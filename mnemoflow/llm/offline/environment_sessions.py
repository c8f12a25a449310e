"""Offline handlers of AMemGym generation's later stages (state updates, events, answers and their
checks, queries and their checks): deterministic template choices that satisfy the validators
for real."""
