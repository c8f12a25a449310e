"""Offline handlers of AMemGym generation's first stages (profile, questions, merge and unify
types, initial state): deterministic choices from the shipped persona pool and topic templates
that satisfy the stages' validators for real."""
