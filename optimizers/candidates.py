"""Candidate history: every program an optimizer evaluates, with its score, and the best so far.

Most DSPy optimizers (random search, MIPROv2, COPRO, GEPA's full evaluations) score candidates
with `dspy.Evaluate`; a DSPy callback on Evaluate sees the program and its score without
touching the optimizer. The history is the optimizer's "candidate history" artifact, and the best
candidate is what a compile stopped by its budget keeps.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import dspy
from dspy.utils.callback import BaseCallback

from runtime.records import canonical_json, sha256_hex


@dataclass
class Candidate:
    """One evaluated candidate program."""

    index: int
    score: float  # mean metric in [0, 1] (DSPy's Evaluate reports percent; normalised here)
    n_examples: int
    n_demos: int
    instructions_hash: str
    state: dict[str, Any] = field(repr=False)
    wall_s: float = 0.0
    note: str = ""

    def summary(self) -> dict[str, Any]:
        """The candidate without its program state (for tables and history files)."""
        row = asdict(self)
        row.pop("state")
        return row


def program_state(program: dspy.Module) -> dict[str, Any]:
    """JSON-ready state of a program (demos, instructions) as DSPy saves it."""
    return json.loads(json.dumps(program.dump_state(), default=str))


def count_demos(program: dspy.Module) -> int:
    """Total number of demos over the program's predictors."""
    return sum(len(getattr(p, "demos", []) or []) for p in program.predictors())


def instructions_hash(program: dspy.Module) -> str:
    """Short hash of the instructions of every predictor (tells instruction candidates apart)."""
    texts = [getattr(p.signature, "instructions", "") for p in program.predictors()]
    return sha256_hex(canonical_json(texts))[:12]


class CandidateTracker(BaseCallback):
    """DSPy callback recording each `dspy.Evaluate` call as a candidate; optionally appends to a JSONL file."""

    def __init__(self, history_path: Optional[Path] = None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[dict[str, Any], int, int, str, float]] = {}
        self.candidates: list[Candidate] = []
        self.history_path = history_path

    def on_evaluate_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        """Snapshot the program about to be evaluated."""
        program = inputs.get("program")
        if program is None:
            return
        devset = inputs.get("devset") or getattr(instance, "devset", None) or []
        snapshot = (program_state(program), len(devset), count_demos(program),
                    instructions_hash(program), time.perf_counter())
        with self._lock:
            self._pending[call_id] = snapshot

    def on_evaluate_end(self, call_id: str, outputs: Any, exception: Optional[BaseException] = None) -> None:
        """Record the score of a finished evaluation (an interrupted one is dropped)."""
        with self._lock:
            pending = self._pending.pop(call_id, None)
        if pending is None or exception is not None or outputs is None:
            return
        score = _score_of(outputs)
        if score is None:
            return
        state, n, demos, ihash, started = pending
        self.add(Candidate(index=-1, score=score, n_examples=n, n_demos=demos, instructions_hash=ihash,
                           state=state, wall_s=round(time.perf_counter() - started, 3)))

    def add(self, candidate: Candidate) -> Candidate:
        """Append a candidate (its index is assigned here) and persist it when a path is set."""
        with self._lock:
            candidate.index = len(self.candidates)
            self.candidates.append(candidate)
            if self.history_path is not None:
                self.history_path.parent.mkdir(parents=True, exist_ok=True)
                with self.history_path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps({**candidate.summary(), "state": candidate.state}) + "\n")
        return candidate

    def best(self) -> Optional[Candidate]:
        """The best candidate: scored on the most examples first, then the highest score, earliest wins."""
        with self._lock:
            if not self.candidates:
                return None
            return max(self.candidates, key=lambda c: (c.n_examples, c.score, -c.index))

    def history(self) -> list[dict[str, Any]]:
        """Summaries of all candidates in evaluation order."""
        with self._lock:
            return [c.summary() for c in self.candidates]


def load_history(path: Path) -> list[Candidate]:
    """Candidates persisted by a tracker (a torn last line from a crash is skipped)."""
    found: list[Candidate] = []
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            found.append(Candidate(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return found


def _score_of(outputs: Any) -> Optional[float]:
    score = getattr(outputs, "score", None)
    try:
        value = float(score)
    except (TypeError, ValueError):
        return None
    # dspy.Evaluate's EvaluationResult reports a percentage.
    return value / 100.0
