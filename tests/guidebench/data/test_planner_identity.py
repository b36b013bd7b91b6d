"""Planner records known by what the planner was shown, not by when and where the runner ran: logs and archives
re-dated, every branch renamed and the repository checked out elsewhere import as the same records (archived and
rebuilt packets alike), in the same splits, so a provenance of the first import recognises every record."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

from evals.data import SPLITS, load_records
from guidebench.cli import main
from runtime.provenance import Provenance

STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def _redated(text: str) -> str:
    """Every UTC timestamp moved 400 days and 7 hours later."""
    shift = lambda m: (datetime.strptime(m.group(0), "%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
                       + timedelta(days=400, hours=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return STAMP.sub(shift, text)


def _renamed_branch(name: object) -> object:
    return f"exp/{name.split('/', 1)[-1]}-again" if isinstance(name, str) and name.startswith("iter/") else name


def _moved_entry(entry: dict) -> dict:
    entry = dict(entry, branch=_renamed_branch(entry.get("branch")))
    if "base_branch" in entry:
        entry["base_branch"] = "trunk"
    return entry


def _moved_packet(packet: dict) -> dict:
    packet = _moved_entry(packet)
    packet["repo"] = dict(packet.get("repo") or {}, worktree_path="/elsewhere/checkout-2",
                          origin_url="https://example.org/fork/kernel.git", github_web_url=None)
    packet["experiment_log_tail"] = [json.dumps(_moved_entry(json.loads(line)), sort_keys=True)
                                     if isinstance(line, str) and line.startswith("{") else line
                                     for line in packet.get("experiment_log_tail") or []]
    summary = packet.get("experiment_summary") or {}
    for key in ("last_attempt", "last_valid_attempt"):
        if isinstance(summary.get(key), dict):
            summary[key] = _moved_entry(summary[key])
    summary["recent_attempts"] = [_moved_entry(a) for a in summary.get("recent_attempts") or []]
    return packet


def _moved_logs(source: Path, target: Path) -> int:
    """A copy of planner logs re-dated, branches renamed (`iter/N-x` -> `exp/N-x-again`, base `trunk`) and the
    archived packets' checkout moved, as the runner would have written them there and then; packets moved."""
    moved = 0
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        if path.name == "log.jsonl":
            text = "".join(json.dumps(_moved_entry(json.loads(line)), sort_keys=True) + "\n"
                           for line in text.splitlines() if line.strip())
        elif path.name.endswith("packet.json"):
            text = json.dumps(_moved_packet(json.loads(text)), indent=2, sort_keys=True) + "\n"
            moved += 1
        elif path.name == "state.json":
            state = json.loads(text)
            state = dict(_moved_entry(state), packet=_moved_packet(state["packet"]))
            text = json.dumps(state, indent=2, sort_keys=True) + "\n"
        out.write_text(_redated(text), encoding="utf-8")
    return moved


def test_redated_renamed_and_moved_planner_logs_are_the_same_records(tmp_path: Path):
    assert main(["data", "simulate", "experiments", "--episodes", "6", "--seed", "4", "--out",
                 str(tmp_path / "logs")]) == 0
    assert _moved_logs(tmp_path / "logs", tmp_path / "moved") > 10
    for logs in ("logs", "moved"):
        assert main(["data", "import", str(tmp_path / logs), "--kind", "experiments", "--out",
                     str(tmp_path / f"ds-{logs}"), "--no-progress"]) == 0
    before = {split: load_records(tmp_path / "ds-logs", split) for split in SPLITS}
    after = {split: load_records(tmp_path / "ds-moved", split) for split in SPLITS}
    archived = sum(r.plan is not None for records in after.values() for r in records)
    assert archived > 10 and archived == sum(r.plan is not None for records in before.values() for r in records)
    # the lines and packets are other texts (timestamps, branches, checkout), but for an episode's first rebuilt
    # packet, which shows no attempt yet...
    same_text = {r.inputs_hash for rs in before.values() for r in rs} & {r.inputs_hash for rs in after.values()
                                                                         for r in rs}
    assert len(same_text) <= 6
    # ...of the same records, in the same splits: a provenance of the first import knows every one
    learned = Provenance.of("a" * 64, before)
    for split in SPLITS:
        assert len(after[split]) == len(before[split]) and learned.overlap(after[split]) == len(after[split])
        assert sorted(r.content_hash for r in after[split]) == sorted(r.content_hash for r in before[split])
