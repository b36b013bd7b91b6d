"""Scoring decision programs: LM usage accounting, metrics, replay, statistics, simulators.

Kept free of imports on purpose: each submodule pulls in only what it needs.
"""
