"""Helpers shared by the frozen-module tests: exporting, tampering on purpose, small datasets."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable, Optional

from guidebench.release.export import ExportResult, export_frozen, source_from_registry
from runtime.checksums import write_checksums
from runtime.fullauto import FullAutoTurnSummary, GuardrailConfig
from runtime.records import DecisionRecord, LoggedDecision, OutcomeLabel


def export_program(entry: str, out: Path, *, name: str = "X", version: str = "0.1.0",
                   state: Optional[Path] = None, **kwargs: Any) -> ExportResult:
    """Export a registered program the way `guidebench export --program` does."""
    return export_frozen(source_from_registry(entry, state), name=name, version=version, out=out, **kwargs)


def edit_json(folder: Path, relative: str, change: Callable[[Any], Any], *, reseal: bool = True) -> None:
    """Change a JSON file of an export in place; `reseal` rewrites the checksums to reach deeper checks."""
    path = folder / relative
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if reseal:
        (folder / "checksums.sha256").unlink()
        write_checksums(folder)


def summary(**fields: Any) -> FullAutoTurnSummary:
    """A turn summary with sensible defaults."""
    base = {"thread_id": "thread-1", "turn_id": "turn-1", "turn_plan": "1. edit\n2. test",
            "diff_summary": "M src/app.py (+3 -1)", "token_usage": json.dumps({"totalTokens": 1200})}
    base.update(fields)
    return FullAutoTurnSummary.model_validate(base, strict=False)


_STATES = (
    # (summary fields, the right action)
    ({"last_turn_status": "completed", "turn_plan": "1. add tests [in progress]", "diff_summary": "M a.py"}, "continue"),
    ({"last_turn_status": "completed", "pending_approvals": "2"}, "pause"),
    ({"last_turn_status": "failed", "turn_error": "build failed"}, "stop"),
    ({"last_turn_status": "completed", "last_agent_message": "All done: tests pass.", "turn_plan": "",
      "diff_summary": ""}, "stop"),
)


def decision_records(n: int, seed: int, *, label_of: Optional[Callable[[FullAutoTurnSummary], str]] = None,
                     logged_wrong: float = 0.7) -> list[DecisionRecord]:
    """Labeled decision records; the logged (deployed) decision is wrong with probability `logged_wrong`."""
    rng = random.Random(seed)
    records = []
    for index in range(n):
        fields, right = _STATES[index % len(_STATES)]
        s = summary(thread_id=f"thread-{index // 8}", turn_id=f"turn-{index}", turn_count=index % 7, **fields)
        label = label_of(s) if label_of else right
        logged = label if rng.random() >= logged_wrong else rng.choice([a for a in ("continue", "pause", "stop")
                                                                        if a != label])
        records.append(DecisionRecord.build(
            s, GuardrailConfig(), run_id=f"fullauto-run-{index // 8}", sequence_id=index,
            logged=LoggedDecision(action=logged, confidence=0.8, model_action=logged, model_confidence=0.8,
                                  reason="logged", state="running" if logged == "continue" else "paused"),
            label=OutcomeLabel(action=label, source="human", reason="test label")))
    return records


def make_dataset(folder: Path, records: list[DecisionRecord]) -> str:
    """A dataset folder whose dev and test splits both hold `records`; returns the dataset id."""
    from evals.data import save_dataset

    return save_dataset(folder, "fullauto", {"train": records[:4], "dev": records, "test": records})


def hub_relative(folder) -> str:
    """The export's hub file, `dsrs/optimized/<signature_name>/<compiled_id>.json`, relative to the folder."""
    from pathlib import Path

    found = sorted(p for p in Path(folder, "dsrs", "optimized").rglob("*.json"))
    assert len(found) == 1, f"expected one hub file, found {found}"
    return found[0].relative_to(folder).as_posix()
