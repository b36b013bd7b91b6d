"""Import of the shadow sidecar: exact joins, and every bad line quarantined with its reason and counted once."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from evals.data import load_records
from guidebench.data import import_logs
from guidebench.errors import GuidebenchError
from runtime.shadow_log import SHADOW_FILE
from runtime.records import inputs_hash

REASONS = ("shadow_invalid", "shadow_wrong_module", "shadow_checksum_mismatch", "shadow_duplicates",
           "shadow_unmatched", "shadow_inputs_mismatch", "shadow_config_mismatch")


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory) -> dict:
    """Simulated runs of the deployed policy with a rules export shadowing them (the real writer's shapes)."""
    from frozen_support import export_program
    from guidebench.release.closed_loop import run_loop
    from guidebench.release.promotion import PromotionLedger

    root = tmp_path_factory.mktemp("shadowed")
    module = export_program("full_auto.rules", root / "rules", name="rules-candidate").path
    other = export_program("full_auto.always_continue", root / "other", name="other").path
    run_loop(None, runs=12, seed=4, out=root / "logs", shadow=module, ledger=PromotionLedger(root / "ledger.jsonl"))
    return {"root": root, "logs": root / "logs", "module": module, "other": other}


def _sidecar(logs: Path) -> list[dict]:
    return [json.loads(line) for line in (logs / SHADOW_FILE).read_text(encoding="utf-8").splitlines()]


def _shadow_counts(report) -> dict:
    return {key: value for key, value in report.model_dump().items() if key.startswith("shadow_")}


def _side_quarantine(out: Path) -> list[dict]:
    path = out / "quarantine-side.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    return [entry for entry in map(json.loads, lines) if entry["source"].endswith(SHADOW_FILE)]


def test_every_shadow_line_of_a_clean_log_joins_its_decision(shadowed, tmp_path):
    report = import_logs(shadowed["logs"], "fullauto", tmp_path / "data")
    lines = _sidecar(shadowed["logs"])
    counts = _shadow_counts(report)
    assert counts["shadow_lines"] == counts["shadow_joined"] == len(lines) == report.imported
    assert all(counts[key] == 0 for key in REASONS) and counts["shadow_clock_backwards"] == 0
    assert report.redactions > 0, "some summaries held a secret: their lines join by the hash before redaction"
    assert counts["shadow_module"]["name"] == "rules-candidate" and report.distributions["shadow_statuses"] == {
        "ok": len(lines)}
    records = load_records(tmp_path / "data", "all")
    by_turn = {(line["run_id"], line["sequence_id"], line["turn_id"]): line for line in lines}
    for record in records:
        line = by_turn[(record.run_id, record.sequence_id, record.turn_id)]
        assert record.shadow.enforced.action == line["enforced"]["action"]
        assert record.shadow.source.line == lines.index(line) + 1
        assert line["inputs_hash"] in (record.inputs_hash, inputs_hash(record.summary, record.config)) or \
            "[REDACTED" in record.summary.diff_summary
    assert any(record.run_id == "unknown" for record in records), "orphan decisions join too"


def _damage(logs: Path) -> dict[str, int]:
    """Damage a copy of the sidecar in every documented way; returns the counts the import must give."""
    lines = _sidecar(logs)
    runs = Counter(line["run_id"] for line in lines)
    defaults = {"min_confidence": 0.55, "max_turns": 200, "no_progress_limit": 3, "max_tokens": None}
    # a run whose file goes missing: the import then judges its decisions under the defaults
    lost = next(run for run, _n in runs.most_common() if run != "unknown" and
                next(line for line in lines if line["run_id"] == run)["config"] != defaults)
    (logs / "runs" / f"{lost}.json").unlink()
    usable = [index for index, line in enumerate(lines) if line["run_id"] != lost]
    a, b, c, d, e, f, g, h, i, j = usable[1:11]
    other_hash = lines[a]["inputs_hash"][::-1]
    lines[a]["module"] = dict(lines[a]["module"], name="someone-else")
    lines[b]["module"] = dict(lines[b]["module"], checksum="0" * 64)
    lines[d]["turn_id"] = "a-turn-never-logged"
    lines[e]["run_id"] = "fullauto-never-logged"
    lines[f]["inputs_hash"] = other_hash
    lines[g]["deployed_action"] = "stop" if lines[g]["deployed_action"] != "stop" else "continue"
    lines[h]["timestamp"] = "2001-01-01T00:00:00Z"  # the clock went backwards: still joined by its keys
    text = [json.dumps(line) for line in lines]
    text[i] = text[i][: len(text[i]) // 2]  # a line cut short by a crash
    text[j] = json.dumps(dict(lines[j], schema_version=2))
    text.append(json.dumps(lines[c]))  # one turn twice: the second line is the duplicate
    text.insert(5, "")  # a blank line counts nowhere
    (logs / SHADOW_FILE).write_text("\n".join(text) + "\n", encoding="utf-8")
    lost_lines = runs[lost]
    return {"shadow_lines": len(lines) + 1, "shadow_invalid": 2, "shadow_wrong_module": 1,
            "shadow_checksum_mismatch": 1, "shadow_duplicates": 1, "shadow_unmatched": 2,
            "shadow_inputs_mismatch": 2, "shadow_config_mismatch": lost_lines,
            "shadow_joined": len(lines) - 8 - lost_lines, "shadow_clock_backwards": 1}


def test_bad_shadow_lines_are_quarantined_with_their_reason_and_no_line_is_used_twice(shadowed, tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(shadowed["logs"], logs)
    expected = _damage(logs)
    report = import_logs(logs, "fullauto", tmp_path / "data", shadow_module=str(shadowed["module"]))
    counts = _shadow_counts(report)
    assert {key: counts[key] for key in expected} == expected
    assert counts["shadow_lines"] == counts["shadow_joined"] + sum(counts[key] for key in REASONS)
    quarantined = _side_quarantine(tmp_path / "data")
    assert len(quarantined) == counts["shadow_lines"] - counts["shadow_joined"]
    assert len({entry["line"] for entry in quarantined}) == len(quarantined), "each line quarantined once"
    errors = " | ".join(entry["error"] for entry in quarantined)
    for phrase in ("schema_version", "is not the judged rules-candidate@0.1.0", "has checksum 0000000000000000",
                   "already has a shadow line", "no decision in the log has", "had other inputs",
                   "names deployed action", "the import judged the decision", "(default)"):
        assert phrase in errors, phrase
    records = load_records(tmp_path / "data", "all")
    assert sum(record.shadow is not None for record in records) == counts["shadow_joined"]
    sources = [record.shadow.source.line for record in records if record.shadow is not None]
    assert len(sources) == len(set(sources)), "no line joins two decisions"


def test_the_judged_module_decides_which_lines_count(shadowed, tmp_path):
    report = import_logs(shadowed["logs"], "fullauto", tmp_path / "data", shadow_module=str(shadowed["other"]))
    counts = _shadow_counts(report)
    assert counts["shadow_joined"] == 0 and counts["shadow_wrong_module"] == counts["shadow_lines"] > 0
    assert counts["shadow_module"]["name"] == "other"
    tampered = tmp_path / "tampered"
    shutil.copytree(shadowed["module"], tampered)
    (tampered / "program.json").write_text("{}", encoding="utf-8")
    with pytest.raises(GuidebenchError, match=r"^--shadow-module .*tampered: checksum mismatch"):
        import_logs(shadowed["logs"], "fullauto", tmp_path / "again", shadow_module=str(tampered))


def test_without_a_named_module_the_one_most_lines_name_is_judged(shadowed, tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(shadowed["logs"], logs)
    lines = _sidecar(logs)
    lines[0]["module"] = dict(lines[0]["module"], name="first-but-alone")
    (logs / SHADOW_FILE).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    counts = _shadow_counts(import_logs(logs, "fullauto", tmp_path / "data"))
    assert counts["shadow_module"]["name"] == "rules-candidate"
    assert (counts["shadow_wrong_module"], counts["shadow_joined"]) == (1, len(lines) - 1)


def test_logs_without_a_sidecar_import_as_before(shadowed, tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(shadowed["logs"], logs)
    (logs / SHADOW_FILE).unlink()
    report = import_logs(logs, "fullauto", tmp_path / "data")
    assert not _shadow_counts(report) and all(r.shadow is None for r in load_records(tmp_path / "data", "all"))
    assert "shadow" not in load_records(tmp_path / "data", "test")[0].model_dump_json()


def test_a_full_disk_while_spooling_the_sidecar_is_the_disks_fault_not_the_sidecars(shadowed, tmp_path, monkeypatch,
                                                                                   capsys):
    # The sidecar's lines are spooled as they are read: a refused write ends the import and says so, rather than
    # counting the sidecar as unreadable and losing its remaining lines.
    import errno

    from guidebench.cli import main
    from guidebench.data.spool import GroupedSpool

    append = GroupedSpool.append

    def full(self, group, text):
        if self.path.name.startswith("shadow-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return append(self, group, text)

    monkeypatch.setattr(GroupedSpool, "append", full)
    out = tmp_path / "out"
    assert main(["data", "import", str(shadowed["logs"]), "--kind", "fullauto", "--out", str(out),
                 "--no-progress"]) == 2
    assert "the disk is full" in capsys.readouterr().err and not out.exists()
