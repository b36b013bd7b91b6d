"""runtime.records: decision records round-trip as JSON, their ids derive from their content, outcome labels name
their source, and a planner record's inputs have an identity of their own."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from runtime import (
    DecisionLogLine,
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailAudit,
    GuardrailConfig,
    LoggedDecision,
    OutcomeLabel,
    SourceRef,
)
from runtime.records import packet_hash
from shape_support import AUDIT, LINE, SUMMARY, roundtrip


def record():
    summary = FullAutoTurnSummary.model_validate(SUMMARY)
    return DecisionRecord.build(
        summary, GuardrailConfig(max_tokens=100000), run_id=LINE["run_id"], workspace_id="ws_1", sequence_id=3,
        timestamp=LINE["timestamp"], config_source="run_file",
        logged=LoggedDecision(action="pause", confidence=0.4, model_action="continue", model_confidence=0.4,
                              reason="Low confidence", state="paused"),
        guardrail=GuardrailAudit.model_validate(AUDIT), model=LINE["model"],
        raw_prediction={"action": "continue", "confidence": "0.4"},
        label=OutcomeLabel(action="continue", source="rule:resumed_at_once", reason="user resumed", confidence=0.8,
                           next_input="go on"),
        source=SourceRef(file="fullauto-decisions.jsonl", line=4),
    )


def test_decision_record_round_trip():
    rec = record()
    text = rec.model_dump_json()
    back = DecisionRecord.model_validate_json(text)
    assert back == rec
    assert back.model_dump_json() == text
    assert DecisionRecord.model_validate(json.loads(text)) == rec


def test_decision_record_from_a_logged_line_round_trips():
    line = roundtrip(DecisionLogLine, LINE)
    rec = DecisionRecord.build(line.summary, GuardrailConfig(), run_id=line.run_id, guardrail=line.guardrail)
    assert DecisionRecord.model_validate_json(rec.model_dump_json()) == rec
    assert rec.summary.model_dump() == SUMMARY


def test_decision_record_ids_are_content_derived():
    a, b = record(), record()
    assert a.record_id == b.record_id and a.inputs_hash == b.inputs_hash
    assert len(a.inputs_hash) == 64


@pytest.mark.parametrize("source,ok", [("human", True), ("simulator", True), ("rule:resumed_at_once", True),
                                       ("rule:", False), ("model", False), ("", False)])
def test_outcome_label_sources(source, ok):
    if ok:
        assert OutcomeLabel(action="stop", source=source).source == source
    else:
        with pytest.raises(ValidationError, match="source"):
            OutcomeLabel(action="stop", source=source)


def test_a_planner_record_is_known_by_the_packet_the_planner_sees():
    from optimizer_support import episode_records
    from runtime.records import packet_hash

    records = episode_records(5, 0)[:4]
    assert len({r.inputs_hash for r in records}) == 4 and records[0].inputs_hash == packet_hash(records[0].packet)
    # the same packet read back under another record id (a re-import) is the same record
    again = [r.model_validate_json(r.model_dump_json()).model_copy(update={"record_id": "x"}) for r in records]
    assert [r.inputs_hash for r in again] == [r.inputs_hash for r in records]


# ----- content identity: what provenance knows a record by -------------------------------------------------------

SAMPLE_LOG = "datasets/sample/fullauto/fullauto-decisions.jsonl"


def _renamed(text: str, pattern: str) -> str:
    """Every match of `pattern` in `text` mapped one-to-one to a fresh value of the same shape."""
    import re
    import uuid

    fresh: dict[str, str] = {}
    return re.sub(pattern, lambda m: fresh.setdefault(m.group(0), str(uuid.uuid4()) if "-" in m.group(0)
                                                      else uuid.uuid4().hex + uuid.uuid4().hex[:8]), text)


def test_a_decision_renamed_id_for_id_keeps_its_content_hash():
    from pathlib import Path

    from runtime.records import ID_PATTERN

    root = Path(__file__).resolve().parents[2]
    lines = (root / SAMPLE_LOG).read_text(encoding="utf-8").splitlines()[:40]
    uuid_re = ID_PATTERN.pattern
    originals = [DecisionLogLine.model_validate_json(line) for line in lines]
    renamed = [DecisionLogLine.model_validate_json(_renamed(line, uuid_re)) for line in lines]
    assert originals[0].summary.thread_id != renamed[0].summary.thread_id
    for before, after in zip(originals, renamed):
        a = DecisionRecord.build(before.summary, GuardrailConfig(), run_id=before.run_id)
        b = DecisionRecord.build(after.summary, GuardrailConfig(), run_id=after.run_id)
        # the sidecar's join hash keeps the ids (docs/shadow.md); the content hash does not
        assert a.inputs_hash != b.inputs_hash and a.record_id != b.record_id
        assert a.content_hash == b.content_hash and len(a.content_hash) == 64
    # distinct turns stay distinct
    assert len({DecisionRecord.build(o.summary, GuardrailConfig()).content_hash for o in originals}) == len(
        {(o.summary.model_copy(update={"thread_id": "", "turn_id": ""}).model_dump_json()) for o in originals})


def test_the_content_hash_drops_exactly_the_identifiers():
    base = record()
    summary = base.summary
    # the summary's ids, a recent action's turn id and timestamp: identifiers
    actions = json.loads(summary.recent_actions)
    actions[0].update(turn_id="turn_99", timestamp=1800000000)
    same = [summary.model_copy(update={"thread_id": "thr_2", "turn_id": "turn_8"}),
            summary.model_copy(update={"recent_actions": json.dumps(actions, indent=2)})]
    assert all(DecisionRecord.build(s, base.config).content_hash == base.content_hash for s in same)
    # what the turn holds is content: the plan, the diff, the counts, the config, a recent action's decision
    actions[0]["action"] = "pause"
    other = [summary.model_copy(update={"diff_summary": "{\n  \"diff\": \"+y\"\n}"}),
             summary.model_copy(update={"turn_count": 8}),
             summary.model_copy(update={"recent_actions": json.dumps(actions)})]
    hashes = {DecisionRecord.build(s, base.config).content_hash for s in other}
    hashes.add(DecisionRecord.build(summary, GuardrailConfig()).content_hash)
    assert base.content_hash not in hashes and len(hashes) == 4
    # which ids repeat where is content: one id twice is not two different ids
    one, two = "0b6f1c52-3c1e-4c55-9d7e-5d8f0c7e2a11", "1c7a2d63-4d2f-4d66-8e8f-6e9a1d8f3b22"
    twice = summary.model_copy(update={"turn_plan": f"{one} {one}"})
    pair = summary.model_copy(update={"turn_plan": f"{one} {two}"})
    upper = summary.model_copy(update={"turn_plan": f"{two.upper()} {two}"})
    assert DecisionRecord.build(twice, base.config).content_hash != DecisionRecord.build(pair, base.config).content_hash
    same_id = DecisionRecord.build(upper, base.config).content_hash  # an id in upper case is the same id
    assert DecisionRecord.build(twice, base.config).content_hash == same_id


def test_a_planner_record_renamed_keeps_its_content_hash():
    from optimizer_support import episode_records
    from runtime.records import packet_content_hash

    records = episode_records(6, 0)
    assert len({r.content_hash for r in records}) == len(records)
    for r in records:
        data = r.packet.model_dump(mode="json")
        tail = []
        for line in data["experiment_log_tail"]:
            entry = json.loads(line) if isinstance(line, str) else dict(line)
            entry.update(iteration_id=entry.get("iteration_id", 0) + 500, branch="iter/9999-other",
                         head_sha="f" * 40, base_sha="e" * 40, timestamp_utc="2031-01-01T00:00:00Z")
            tail.append(json.dumps(entry, sort_keys=True))
        data["experiment_log_tail"] = tail
        for attempt in data["experiment_summary"].get("recent_attempts") or []:
            attempt.update(iteration_id=7777, branch="iter/7777-x", head_sha="a" * 40)
        renamed = r.packet.model_validate(data)
        assert packet_content_hash(renamed) == r.content_hash
        if tail:
            assert packet_hash(renamed) != r.inputs_hash
            # a changed attempt is other content
            entry = json.loads(tail[-1])
            entry["cycles"] = (entry.get("cycles") or 0) + 1
            data["experiment_log_tail"] = tail[:-1] + [json.dumps(entry)]
            assert packet_content_hash(r.packet.model_validate(data)) != r.content_hash


def test_identifiers_are_found_exactly_where_the_id_pattern_matches():
    """`_without_ids` finds ids by substring search on a mask of the text; the same replacements as a regex scan
    with `ID_PATTERN` (which says what an id is) on texts built to put hex runs, dashes and UUIDs side by side."""
    import random
    import uuid

    from runtime.records import ID_PATTERN, _without_ids

    def by_regex(text: str) -> str:
        seen: dict[str, str] = {}
        return ID_PATTERN.sub(lambda m: seen.setdefault(m.group(0).lower(), f"<id:{len(seen) + 1}>"), text)

    rng = random.Random(7)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))), str(uuid.UUID(int=rng.getrandbits(128))).upper(),
           *(f"%0{n}x" % rng.getrandbits(4 * n) for n in (39, 40, 41, 63, 64, 65))]
    pieces = [*ids, *"0aF-:x \"é中", "\ud800"]
    replaced = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) if rng.random() < 0.4 else rng.choice("0123456789abcdefABCDEF-g")
                       * rng.randint(1, 70) for _ in range(rng.randint(0, 10)))
        assert _without_ids(text) == by_regex(text), text
        replaced += _without_ids(text) != text
    assert replaced > 1_000  # the texts hold ids often enough to test the replacing
    twice = f"a {ids[0]} b {ids[0].upper()} {ids[3]}-{ids[0]}"
    assert _without_ids(twice) == "a <id:1> b <id:1> <id:2>-<id:1>" == by_regex(twice)


# ----- identities that reformatting must not defeat --------------------------------------------------------------

JSON_TEXT_FIELDS = ("turn_plan", "diff_summary", "token_usage", "recent_actions")


def _reserialised(summary: FullAutoTurnSummary, style: str) -> FullAutoTurnSummary:
    """The summary with its JSON texts written again: `compact` (no whitespace, the writer's key order) or
    `sorted` (keys sorted, indented as the writer does)."""
    update = {}
    for name in JSON_TEXT_FIELDS:
        if not getattr(summary, name):  # "" when the writer had none
            continue
        value = json.loads(getattr(summary, name))
        update[name] = json.dumps(value, separators=(",", ":")) if style == "compact" else \
            json.dumps(value, indent=2, sort_keys=True)
    return summary.model_copy(update=update)


@pytest.mark.parametrize("style", ["compact", "sorted"])
def test_a_decision_with_its_json_texts_reserialised_is_the_same_record(style):
    """Every decision of the sample, its plan, diff, token usage and recent actions re-serialised (the same
    values), is recognised by a provenance of the originals; a changed value is another record."""
    from pathlib import Path

    from runtime.provenance import Provenance

    root = Path(__file__).resolve().parents[2]
    lines = [DecisionLogLine.model_validate_json(line)
             for line in (root / SAMPLE_LOG).read_text(encoding="utf-8").splitlines() if line.strip()]
    originals = [DecisionRecord.build(line.summary, GuardrailConfig(), run_id=line.run_id) for line in lines]
    again = [DecisionRecord.build(_reserialised(line.summary, style), GuardrailConfig(), run_id=line.run_id)
             for line in lines]
    rewritten = sum(a.summary.token_usage != b.summary.token_usage for a, b in zip(originals, again))
    assert len(lines) == 1273 and rewritten > 1200  # the texts changed...
    assert sum(a.inputs_hash != b.inputs_hash for a, b in zip(originals, again)) == len(lines)
    learned = Provenance.of("a" * 64, {"train": originals})
    assert learned.overlap(again) == len(lines)  # ...and every record is still known by its content
    # a value that changed is content: one more token is another record
    usage = json.loads(lines[0].summary.token_usage)
    usage["tokenUsage"]["total"]["totalTokens"] += 1
    changed = lines[0].summary.model_copy(update={"token_usage": json.dumps(usage, separators=(",", ":"))})
    assert DecisionRecord.build(changed, GuardrailConfig()).content_hash != originals[0].content_hash


@pytest.mark.parametrize("text, value", [
    ('{\n  "b": 1,\n  "a": [1, 2]\n}', {"a": [1, 2], "b": 1}),
    ("3", 3), ("", ""), ("not json {", "not json {"),
    ('"a bare string"', '"a bare string"'),  # kept as written: a text never hashes like another text
    pytest.param("[" * 100_000 + "]" * 100_000, "[" * 100_000 + "]" * 100_000, id="too-deep"),  # as written
], ids=lambda item: item if isinstance(item, str) and len(item) < 40 else None)
def test_a_json_text_is_hashed_by_its_value_and_any_other_text_as_written(text, value):
    from runtime.records import json_value

    assert json_value(text) == value


def test_a_json_text_nested_about_as_deep_as_python_reads_still_has_a_content_hash():
    """Around the interpreter's recursion limit a text may read back and not write again: hashed as written."""
    import sys

    base = record()
    hashes = set()
    for depth in range(sys.getrecursionlimit() - 40, sys.getrecursionlimit() + 5):
        deep = base.summary.model_copy(update={"turn_plan": "[" * depth + "]" * depth})
        hashes.add(DecisionRecord.build(deep, base.config).content_hash)
    assert len(hashes) == 45


def _archived_packets():
    """The sample's archived planner packets (episodes 0001, 0003, 0004), as the loop runner dumped them."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets" / "sample" / "experiments"
    files = sorted([*root.glob("*/.advisor/manual_archive/iter_*/packet.json"),
                    *root.glob("*/.advisor/codex*/iter_*_packet.json")])
    return [json.loads(path.read_text(encoding="utf-8")) for path in files]


def test_an_archived_packet_redated_renamed_and_moved_is_the_same_record():
    """The archived packet's top-level timestamp, branches, base sha and `repo` block (worktree path, origin) say
    when and where the runner ran: another date, branch names or checkout leave the record the same."""
    from runtime.advisor import AdvisorPacket
    from runtime.records import packet_content_hash

    packets = _archived_packets()
    assert len(packets) == 112 and all({"timestamp_utc", "branch", "repo"} <= set(p) for p in packets)
    for raw in packets:
        moved = json.loads(json.dumps(raw))
        moved.update(timestamp_utc="2031-07-04T12:00:00Z", branch=f"renamed/{raw['branch']}-x",
                     base_branch="trunk", iteration_id=raw["iteration_id"] + 1000)
        moved["repo"].update(worktree_path="/somewhere/else/checkout", origin_url="git@example.org:fork/repo.git",
                             github_web_url=None)
        tail = []
        for line in moved["experiment_log_tail"]:
            entry = json.loads(line)
            entry.update(timestamp_utc="2031-07-04T11:00:00Z", branch="renamed/" + str(entry.get("branch")))
            tail.append(json.dumps(entry, sort_keys=True))
        moved["experiment_log_tail"] = tail
        for attempt in moved["experiment_summary"].get("recent_attempts") or []:
            attempt["branch"] = "renamed/" + str(attempt.get("branch"))
        a, b = AdvisorPacket.model_validate(raw), AdvisorPacket.model_validate(moved)
        assert packet_hash(a) != packet_hash(b) and packet_content_hash(a) == packet_content_hash(b)
    # what the planner was shown about the kernel is content
    first = dict(packets[0], best_cycles=(packets[0].get("best_cycles") or 0) + 1)
    assert packet_content_hash(AdvisorPacket.model_validate(first)) != \
        packet_content_hash(AdvisorPacket.model_validate(packets[0]))
