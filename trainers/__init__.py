"""Trainers: advantages, losses and the loops that apply them to a policy."""
