"""Identities that reformatting or forging must not defeat, end to end: logs whose JSON texts are re-serialised
(the same values) are still what a module learned from, so `promote` refuses to judge it on them; a provenance
forged to say "learned from no record" and re-signed with the project's own checksum writer is contradicted by the
module's own fitted model, so `promote` refuses it and `eval` flags it, each in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from frozen_support import edit_json
from guidebench.cli import main
from guidebench.release.promotion import PromotionLedger, promote_module

JSON_TEXT_FIELDS = ("turn_plan", "diff_summary", "token_usage", "recent_actions")


def _reserialised_logs(source: Path, target: Path) -> int:
    """A copy of a Full Auto workspace log whose summaries' JSON texts are written compactly with sorted keys (the
    same values); how many texts changed."""
    shutil.copytree(source, target)
    decisions, changed, out = target / "fullauto-decisions.jsonl", 0, []
    for text in decisions.read_text(encoding="utf-8").splitlines():
        line = json.loads(text)
        for name in JSON_TEXT_FIELDS:
            value = line["summary"].get(name)
            if value:
                again = json.dumps(json.loads(value), sort_keys=True, separators=(",", ":"))
                changed += again != value
                line["summary"][name] = again
        out.append(json.dumps(line, separators=(",", ":")))
    decisions.write_text("".join(text + "\n" for text in out), encoding="utf-8")
    return changed


def test_logs_with_their_json_texts_reserialised_are_still_what_the_module_learned_from(fitted, tmp_path: Path):
    from evals.data import dataset_info, load_records
    from optimizer_support import tracking_uri

    assert _reserialised_logs(Path(fitted["logs"]), tmp_path / "logs") > 100
    assert main(["data", "import", str(tmp_path / "logs"), "--kind", "fullauto", "--out", str(tmp_path / "ds"),
                 "--no-progress"]) == 0
    dev, original = load_records(tmp_path / "ds", "dev"), load_records(fitted["ds"], "dev")
    assert len(dev) == len(original) > 0  # the same threads, so the same splits
    assert not {r.inputs_hash for r in dev} & {r.inputs_hash for r in original}  # every text is another text...
    assert {r.content_hash for r in dev} == {r.content_hash for r in original}  # ...with the same values
    record = promote_module(fitted["ex"], data=tmp_path / "ds", split="dev", stage_only=True,
                            ledger=PromotionLedger(tmp_path / "ledger.jsonl"), tracking_uri=tracking_uri(tmp_path))
    ds = dataset_info(tmp_path / "ds")["dataset_id"][:12]
    assert record.outcome == "refused" and record.evidence is None
    assert record.reasons[0].startswith(f"{len(dev)} of the {len(dev)} records of split dev of dataset {ds} are "
                                        "records the program learned from")


@pytest.mark.parametrize("forged", [
    {"identity": "content_hash_v2"},
    {"identity": "content_hash_v2", "dataset_id": None, "splits": {}, "hashes": {}},
])
def test_a_forged_provenance_resigned_is_refused_by_promote_and_flagged_by_eval(fitted, tmp_path: Path, capsys,
                                                                                 forged):
    from optimizer_support import tracking_uri
    from runtime.frozen.loader import verify_frozen

    module = tmp_path / "forged"
    shutil.copytree(fitted["ex"], module)
    n_train = json.loads((module / "program.json").read_text())["trained_model"]["model"]["fit"]["n_train"]
    # re-signed: checksums.sha256 written again by the project's own writer
    edit_json(module, "manifest.json", lambda data: data.update(provenance=dict(forged)))
    assert verify_frozen(module).provenance.contradiction is not None  # it loads: the integrity check passes
    why = (f"provenance unknown: its provenance does not hold together: it lists no record of split train, while "
           f"the program's fitted model counts {n_train} (`n_train` of its fit in program.json): a fitted model "
           "cannot have learned from no record")
    record = promote_module(module, data=fitted["ds"], ledger=PromotionLedger(tmp_path / "ledger.jsonl"),
                            tracking_uri=tracking_uri(tmp_path), stage_only=True)
    assert record.outcome == "refused" and record.evidence is None and len(record.reasons) == 1
    assert record.reasons[0].startswith(why) and "\n" not in record.reasons[0]
    capsys.readouterr()
    assert main(["eval", "--program", str(module), "--data", str(fitted["ds"]), "--split", "dev",
                 "--out", str(tmp_path / "eval"), "--no-track", "--no-progress"]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {why}")
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["learned_from"]["status"] == "unknown" and summary["provenance"] is None
