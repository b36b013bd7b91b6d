"""optimizers.candidates: the tracker prefers candidates scored on the full dev set."""

from __future__ import annotations

from optimizers.candidates import Candidate, CandidateTracker


def test_candidate_tracker_prefers_full_evaluations():
    tracker = CandidateTracker()
    for score, n in ((0.9, 3), (0.6, 10), (0.7, 10), (0.7, 10)):
        tracker.add(Candidate(index=-1, score=score, n_examples=n, n_demos=1, instructions_hash="x", state={}))
    best = tracker.best()
    assert (best.index, best.score, best.n_examples) == (2, 0.7, 10)
