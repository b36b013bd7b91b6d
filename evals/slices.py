"""The slices a post-mortem breaks every score down by, declared once per record kind.

A slice definition is a name and a function of one record that returns the record's value on it: a short
label such as "pause" or "turns 3-4". A new slice is one line in `FULL_AUTO_SLICES` or `PLANNER_SLICES`.
Every slice is a property of the record, never of a program's answer, so two programs replayed on the same
records share their slices and can be compared slice by slice on the same records.

Replay stamps each row with its record's values (`row["slices"]`; `results.parquet` holds them as
`slice.<name>` columns), so a post-mortem runs on an eval folder alone. A row written before slices existed
still gives the slices its own columns carry (`from_row`: the label and its source for Full Auto, the
current family and the pivot requirement for the planner); the others are reported as missing.

Values that cannot be read are never dropped: a field the record does not have gives `MISSING`, a field of
the wrong type (text where a count is expected, a number where a label is) gives `INVALID`; both are slice
values like any other, and the post-mortem pools them with the other small values.

Bands (documented in docs/postmortem.md):
- Full Auto `label_reason`: the label's reason up to its first colon; `turn_band`: the turn count 0-1, 2, 3-4, 5+; `no_progress`: 0, 1, 2+ turns without progress;
  `pending`: pending approvals and tool inputs (counts written as text) as none / approvals / tool inputs /
  both; `guardrail_rule`: the rule the logged audit shows fired ("none": none fired, "no audit": the line
  had none); `run_config`: the guardrail limits of the record's run.
- Planner `plateau_band`: valid attempts since the best 0, 1-2, 3-5, 6+ (hard plateau), unknown;
  `phase`: the iteration 1-10 (early), 11-25 (middle), 26+ (late).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

MISSING = "(missing)"
INVALID = "(invalid)"
UNLABELED = "unlabeled"


@dataclass(frozen=True)
class SliceDef:
    """One slice: its name, its value on a record, and (optional) its value from an older replay row."""

    name: str
    of: Callable[[Any], Any]
    from_row: Optional[Callable[[Mapping[str, Any]], Any]] = None


def band(value: int, edges: Sequence[tuple[int, str]]) -> str:
    """The label of the first band whose upper edge holds `value` (`edges`: (upper, label), the last open)."""
    count = int(value)
    for upper, label in edges:
        if count <= upper:
            return label
    return edges[-1][1]


def _count(text: Any) -> int:
    """A count written as text ("" is 0), as the turn summary holds pending approvals and tool inputs."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise TypeError(f"a count must be text or an integer, got {type(text).__name__}")
    return int(str(text).strip() or 0)


# ----- Full Auto ----------------------------------------------------------------------------------

TURN_BANDS = ((1, "turns 0-1"), (2, "turn 2"), (4, "turns 3-4"), (1 << 62, "turns 5+"))
NO_PROGRESS_BANDS = ((0, "0"), (1, "1"), (1 << 62, "2+"))


def _label(record: Any) -> str:
    return record.label.action if record.label is not None else UNLABELED


def _label_source(record: Any) -> str:
    return record.label.source if record.label is not None else UNLABELED


def _label_reason(record: Any) -> str:
    """The label's reason up to its first colon (labeling rules write "<kind>: <detail>"), at most 60 characters."""
    if record.label is None:
        return UNLABELED
    return record.label.reason.split(":", 1)[0].strip()[:60] or "none"


def _logged_rule(record: Any) -> str:
    audit = record.guardrail
    if audit is None:
        return "no audit"
    return audit.rule if audit.triggered and audit.rule else "none"


def _pending(record: Any) -> str:
    approvals, inputs = _count(record.summary.pending_approvals), _count(record.summary.pending_tool_inputs)
    if approvals and inputs:
        return "approvals and tool inputs"
    return "approvals" if approvals else "tool inputs" if inputs else "none"


def _run_config(record: Any) -> str:
    c = record.config
    return (f"min_confidence {c.min_confidence:g}, max_turns {c.max_turns}, no_progress_limit "
            f"{c.no_progress_limit}, max_tokens {c.max_tokens if c.max_tokens is not None else 'none'}")


def _row_label(row: Mapping[str, Any]) -> Any:
    return row["label_action"] or UNLABELED


def _row_label_source(row: Mapping[str, Any]) -> Any:
    return row["label_source"] or UNLABELED


FULL_AUTO_SLICES: tuple[SliceDef, ...] = (
    SliceDef("label", _label, _row_label),
    SliceDef("label_source", _label_source, _row_label_source),
    SliceDef("label_reason", _label_reason),
    SliceDef("last_turn_status", lambda r: r.summary.last_turn_status),
    SliceDef("guardrail_rule", _logged_rule),
    SliceDef("pending", _pending),
    SliceDef("turn_band", lambda r: band(r.summary.turn_count, TURN_BANDS)),
    SliceDef("no_progress", lambda r: band(r.summary.no_progress_count, NO_PROGRESS_BANDS)),
    SliceDef("run_config", _run_config),
)


# ----- planner ------------------------------------------------------------------------------------

PLATEAU_BANDS = ((0, "0"), (2, "1-2"), (5, "3-5"), (1 << 62, "6+ (hard plateau)"))
PHASE_BANDS = ((10, "early (1-10)"), (25, "middle (11-25)"), (1 << 62, "late (26+)"))


def _pivot(record: Any) -> str:
    from .metrics_planner import pivot_requirement

    return "required" if pivot_requirement(record.packet).required else "not required"


def _current_family(record: Any) -> str:
    from .metrics_planner import pivot_requirement

    return pivot_requirement(record.packet).current_family or "none"


def _plateau(record: Any) -> str:
    plateau = record.packet.plateau_valid_iters_since_best
    return "unknown" if plateau is None else band(plateau, PLATEAU_BANDS)


def _row_pivot(row: Mapping[str, Any]) -> Any:
    value = row["pivot_required"]
    return value if not isinstance(value, bool) else "required" if value else "not required"


PLANNER_SLICES: tuple[SliceDef, ...] = (
    SliceDef("goal", lambda r: r.packet.goal),
    SliceDef("current_family", _current_family, lambda row: row["current_family"] or "none"),
    SliceDef("pivot", _pivot, _row_pivot),
    SliceDef("plateau_band", _plateau),
    SliceDef("phase", lambda r: band(r.iteration_id, PHASE_BANDS)),
)

SLICES: dict[str, tuple[SliceDef, ...]] = {"full_auto": FULL_AUTO_SLICES, "planner": PLANNER_SLICES}


# ----- reading values -----------------------------------------------------------------------------

def _value(read: Callable[[Any], Any], source: Any) -> str:
    """A slice value, never raising: absent fields give MISSING, wrong types INVALID."""
    try:
        value = read(source)
    except (AttributeError, KeyError):
        return MISSING
    except (TypeError, ValueError, OverflowError):
        return INVALID
    if value is None:
        return MISSING
    return value if isinstance(value, str) and value else INVALID


def slice_values(record: Any, kind: str) -> dict[str, str]:
    """Every declared slice's value on one record of a kind (`full_auto` or `planner`)."""
    return {definition.name: _value(definition.of, record) for definition in SLICES[kind]}


def row_values(rows: Sequence[Mapping[str, Any]], kind: str) -> tuple[dict[str, list[str]], list[str]]:
    """({slice: value per row}, slices no row carries): from `row["slices"]`, else the row's own columns."""
    values: dict[str, list[str]] = {}
    missing: list[str] = []
    for definition in SLICES[kind]:
        column = [_row_value(row, definition) for row in rows]
        if rows and all(value is None for value in column):
            missing.append(definition.name)
            continue
        values[definition.name] = [MISSING if value is None else value for value in column]
    return values, missing


def _row_value(row: Mapping[str, Any], definition: SliceDef) -> Optional[str]:
    """The value a row holds for a slice, or None when the row has no trace of it at all."""
    stamped = row.get("slices")
    if isinstance(stamped, Mapping) and definition.name in stamped:
        return _value(lambda s: s[definition.name], stamped)
    if definition.from_row is not None:
        value = _value(definition.from_row, row)
        return None if value == MISSING else value
    return None
