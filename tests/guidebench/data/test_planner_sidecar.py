"""guidebench.data.planner_sidecar: the planner decision sidecar joins its log by iteration and packet hash, and every
bad line is quarantined with its reason and counted, never a traceback."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from guidebench.data import import_logs
from guidebench.data.planner_sidecar import COUNTS
from planner_sidecar_support import (all_records, copy_logs, logs_with_sidecars, report_of, rewrite, side_quarantine,
                                     sidecar_lines)
from runtime.advisor import FAMILIES


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, list]:
    return logs_with_sidecars(tmp_path_factory.mktemp("planner-sidecar"))


def _counts(report: dict) -> dict:
    return {name: report.get(name, 0) for name in COUNTS}


def test_every_line_the_writer_wrote_joins_its_record(written, tmp_path: Path):
    logs, records = written
    out = import_logs(logs, "experiments", tmp_path / "d", progress=False)
    report = report_of(tmp_path / "d")
    assert out.balanced and report["planner_joined"] == report["planner_lines"] == len(records)
    assert sum(report[name] for name in COUNTS[2:-1]) == 0 and not side_quarantine(tmp_path / "d")
    joined = all_records(tmp_path / "d")
    assert all(r.planner_log is not None and r.planner_log.probabilities[r.outcome.family] > 0 for r in joined)
    assert all(r.planner_log.family == r.outcome.strategy_tags[0] for r in joined)
    assert any(r.planner_log.probabilities[r.planner_log.family] < 1 for r in joined)  # it explored
    # a record keeps its text without a sidecar: the planner_log key is absent there
    plain = all_records(logs.parent / "plain")
    assert all("planner_log" not in r.model_dump_json() for r in plain)
    assert [r.record_id for r in plain] == [r.record_id for r in joined]


def _bad_copy(logs: Path, to: Path, edit) -> tuple[Path, list]:
    copied = copy_logs(logs, to)
    path, lines = sidecar_lines(copied)[0]
    lines = edit(copy.deepcopy(lines))
    rewrite(path, lines)
    return copied, lines


def _nan(lines):
    lines[0]["probabilities"][FAMILIES[0]] = math.nan
    return lines


def _negative(lines):
    p = lines[1]["probabilities"]
    p[FAMILIES[0]], p[FAMILIES[1]] = -0.1, p[FAMILIES[1]] + p[FAMILIES[0]] + 0.1
    return lines


def _sum(lines):
    lines[2]["probabilities"] = {f: 0.5 for f in FAMILIES}
    return lines


def _zero(lines):
    line = lines[3]
    others = [f for f in FAMILIES if f != line["family"]]
    line["probabilities"] = {line["family"]: 0.0, others[0]: 0.5, others[1]: 0.5}
    return lines


def _unknown_iteration(lines):
    extra = dict(lines[0], iteration_id=9999)
    return [*lines, extra]


def _two_modules(lines):
    lines[4]["module"] = dict(lines[4]["module"], name="other", checksum="f" * 64)
    return lines


def _other_repository(lines):
    lines[5]["repository"] = "repo-b"
    return lines


def _hash(lines):
    lines[6]["packet_hash"] = "0" * 64
    return lines


def _duplicate(lines):
    return [*lines, lines[7]]


def _family(lines):
    line = lines[8]
    other = next(f for f in FAMILIES if f != line["family"])
    line["family"], line["probabilities"] = other, {f: 1 / 3 for f in FAMILIES}
    return lines


def _garbage(lines):
    return [*lines, "{not json", {"schema_version": 2}, {"schema_version": 1, "iteration_id": "x"}]


@pytest.mark.parametrize("edit, counter, reason", [
    (_nan, "planner_bad_probabilities", "not a finite number"),
    (_negative, "planner_bad_probabilities", "negative"),
    (_sum, "planner_bad_probabilities", "sum to 1.5"),
    (_zero, "planner_zero_chosen", "has probability 0"),
    (_unknown_iteration, "planner_unmatched", "iteration 9999 is not in the log"),
    (_two_modules, "planner_wrong_module", "a second module in one sidecar"),
    (_other_repository, "planner_other_repository", "repository 'repo-b'"),
    (_hash, "planner_packet_mismatch", "packet_hash 000000000000"),
    (_duplicate, "planner_duplicates", "a second line for iteration"),
    (_family, "planner_family_mismatch", "the line chose"),
    (_garbage, "planner_invalid", "schema_version 2"),
])
def test_a_bad_sidecar_line_is_quarantined_with_its_reason_and_counted(written, tmp_path: Path, edit, counter,
                                                                       reason):
    logs, records = written
    copied, lines = _bad_copy(logs, tmp_path / "logs", edit)
    report = import_logs(copied, "experiments", tmp_path / "d", progress=False)
    counts = _counts(report_of(tmp_path / "d"))
    assert report.balanced and counts[counter] >= 1
    assert counts["planner_lines"] == sum(counts[n] for n in COUNTS[1:-1])  # each line in exactly one count
    assert counts["planner_lines"] == sum(len([t for t in p.read_text().splitlines() if t.strip()])
                                          for p in copied.rglob("planner-decisions.jsonl"))
    quarantined = side_quarantine(tmp_path / "d")
    assert any(reason in q["error"] for q in quarantined), [q["error"] for q in quarantined]
    assert report.imported == len(records)  # the log's own records are never lost


def test_a_sidecar_of_another_repository_joins_nothing_and_says_so(written, tmp_path: Path):
    logs, records = written
    copied = copy_logs(logs, tmp_path / "logs")
    (a, lines_a), (b, lines_b) = sidecar_lines(copied)[:2]
    rewrite(a, lines_b)  # the other episode's sidecar: same iterations, other packets
    import_logs(copied, "experiments", tmp_path / "d", progress=False)
    counts = _counts(report_of(tmp_path / "d"))
    overlap = len({l["iteration_id"] for l in lines_a} & {l["iteration_id"] for l in lines_b})
    assert counts["planner_other_repository"] == overlap > 0
    assert any("a sidecar of another repository" in q["error"] for q in side_quarantine(tmp_path / "d"))
    named = import_logs(logs, "experiments", tmp_path / "e", progress=False, planner_repository="repo-z")
    assert named.balanced and _counts(report_of(tmp_path / "e"))["planner_other_repository"] == len(records)


def test_an_unusable_candidate_part_is_dropped_and_counted_the_line_still_joins(tmp_path: Path):
    from planner_sidecar_support import exploring_rules
    from runtime.exploration import ExplorationSettings

    candidate = exploring_rules(tmp_path, ExplorationSettings(), name="candidate")
    logs, records = logs_with_sidecars(tmp_path / "w", episodes=1, iterations=12, candidate=candidate)
    path, lines = sidecar_lines(logs)[0]
    lines[0]["candidate"]["probabilities"] = {f: 0.5 for f in FAMILIES}
    lines[1]["candidate"]["module"] = dict(lines[1]["candidate"]["module"], name="third", checksum="e" * 64)
    rewrite(path, lines)
    import_logs(logs, "experiments", tmp_path / "d", progress=False)
    counts = _counts(report_of(tmp_path / "d"))
    assert counts["planner_candidate_dropped"] == 2 and counts["planner_joined"] == len(records) == 12
    joined = all_records(tmp_path / "d")
    assert [r.planner_log.candidate is None for r in joined[:3]] == [True, True, False]
    assert joined[2].planner_log.candidate.status == "ok" and joined[2].planner_log.candidate.module.name == "candidate"


def test_a_writer_that_follows_the_docs_alone_joins_every_line(written, tmp_path: Path):
    """Lines written with json and hashlib as docs/planner-shadow.md describes them (required keys only)."""
    import hashlib
    import json

    logs, records = written
    copied = copy_logs(logs, tmp_path / "logs")
    by_iteration = {(r.source.file, r.iteration_id): r for r in records}
    for path, lines in sidecar_lines(copied):
        file = path.relative_to(copied).parent.joinpath("log.jsonl").as_posix()
        own = []
        for line in lines:
            packet = by_iteration[(file, line["iteration_id"])].packet.model_dump(mode="json")
            text = json.dumps(packet, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            own.append({"schema_version": 1, "timestamp": "2026-11-28T08:00:00Z", "iteration_id": line["iteration_id"],
                        "packet_hash": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                        "module": {"name": "their-planner", "version": "2.0.0", "checksum": "ab" * 32},
                        "exploration": {"policy": "epsilon", "epsilon": 0.3},
                        "probabilities": line["probabilities"], "family": line["family"]})
        rewrite(path, own)
    import_logs(copied, "experiments", tmp_path / "d", progress=False)
    counts = _counts(report_of(tmp_path / "d"))
    assert counts["planner_joined"] == counts["planner_lines"] == len(records)
    assert {r.planner_log.module.name for r in all_records(tmp_path / "d")} == {"their-planner"}
