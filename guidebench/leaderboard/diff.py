"""Per-record diff of a challenger against the champion: which records changed outcome, and how.

A record is `fixed` when the challenger's per-record score is higher than the champion's, `broken`
when lower, and `changed` when the scores are equal but the decision (or whether the program
raised) differs. Each listed record carries the inputs the programs saw and both decisions.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Optional, Sequence

from guidebench.leaderboard.models import ChallengerDiff, DecisionView, RecordDiff

DIFF_RECORDS_KEPT = 500
INPUT_CHARS_KEPT = 1500


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > INPUT_CHARS_KEPT:
        return value[:INPUT_CHARS_KEPT] + f"… (+{len(value) - INPUT_CHARS_KEPT} chars)"
    return value


def record_inputs(record: Any) -> dict[str, Any]:
    """What the program saw for a record (truncated long texts), for the per-record diff."""
    import programs

    if hasattr(record, "summary"):
        inputs = programs.decision_inputs(record)
    else:
        inputs = programs.planner_inputs(record.packet)
    return {key: _short(value) for key, value in dict(inputs).items()}


def _score(row: dict[str, Any], metric: str = "objective") -> Optional[float]:
    value = row["scores"].get(metric)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def decision_view(row: dict[str, Any], metric: str = "objective") -> DecisionView:
    """The decision a replay row holds (Full Auto: enforced decision and audit; planner: the directive)."""
    error = row.get("error")
    error_text = f"{error['class']}: {error['message']}" if error else None
    if "enforced_action" in row:
        return DecisionView(action=row["enforced_action"], confidence=row.get("enforced_confidence"),
                            reason=row.get("model_reason") or "", next_input=row.get("enforced_next_input") or "",
                            model_action=row.get("model_action"),
                            guardrail_rule=row.get("guardrail_rule") if row.get("guardrail_triggered") else None,
                            score=_score(row, metric), error=error_text,
                            detail={"parse_errors": json.loads(row.get("parse_errors") or "[]")})
    directive = json.loads(row["directive"]) if row.get("directive") else None
    return DecisionView(action=row.get("strategy_family"), score=_score(row, metric), error=error_text,
                        reason=(directive or {}).get("primary_hypothesis", ""),
                        detail={"directive": directive, "schema_errors": json.loads(row.get("schema_errors") or "[]"),
                                "pivot_required": row.get("pivot_required")})


def _decision_key(row: dict[str, Any]) -> Any:
    return row.get("enforced_action") if "enforced_action" in row else row.get("directive")


def record_diff(champion: str, champion_rows: Sequence[dict[str, Any]], challenger: str,
                challenger_rows: Sequence[dict[str, Any]], records_by_id: Mapping[str, Any],
                score_metric: str = "objective") -> ChallengerDiff:
    """Records whose outcome changed between the champion and a challenger, with inputs and both decisions."""
    mine = {row["record_id"]: row for row in challenger_rows}
    fixed = broken = changed = 0
    diffs: list[RecordDiff] = []
    for base in champion_rows:
        other = mine[base["record_id"]]
        before, after = _score(base, score_metric), _score(other, score_metric)
        if before is not None and after is not None and after > before:
            change, fixed = "fixed", fixed + 1
        elif before is not None and after is not None and after < before:
            change, broken = "broken", broken + 1
        elif _decision_key(base) != _decision_key(other) or bool(base.get("error")) != bool(other.get("error")):
            change, changed = "changed", changed + 1
        else:
            continue
        if len(diffs) < DIFF_RECORDS_KEPT:
            diffs.append(RecordDiff(record_id=base["record_id"], change=change, label=base.get("label_action"),
                                    inputs=record_inputs(records_by_id[base["record_id"]]),
                                    champion=decision_view(base, score_metric),
                                    challenger=decision_view(other, score_metric)))
    # Fixed and broken first: they are what moved the objective.
    order = {"broken": 0, "fixed": 1, "changed": 2}
    diffs.sort(key=lambda d: order[d.change])
    return ChallengerDiff(champion=champion, challenger=challenger, score_metric=score_metric, fixed=fixed,
                          broken=broken, changed=changed, records=diffs)
