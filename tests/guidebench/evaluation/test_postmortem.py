"""guidebench.evaluation.postmortem: every eval output holds postmortem.json and postmortem.md, which agree with
metrics.json; a post-mortem that fails costs the eval nothing and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.postmortem import PostMortem
from evals.slices import FULL_AUTO_SLICES
from guidebench.evaluation.run import evaluate
from evals.postmortem import read_postmortem
from guidebench.evaluation.postmortem import JSON_FILE, MARKDOWN_FILE, fmt_interval

from leaderboard_support import make_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("pm-data") / "data", n=60, seed=4)


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))


def test_every_eval_output_holds_its_postmortem_in_json_and_markdown(dataset, tmp_path):
    output = evaluate("rule", dataset, out_dir=tmp_path / "out", track=False, progress=False, n_resamples=200)
    assert output.files["postmortem"].name == JSON_FILE and output.files["postmortem_md"].name == MARKDOWN_FILE
    pm = read_postmortem(output.files["postmortem"])
    assert isinstance(pm, PostMortem) and pm.program == "full_auto.rules" and pm.n_records == 48
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    objective = metrics["objective"]
    assert (pm.overall.value, pm.overall.ci_low, pm.overall.ci_high) == \
        (objective["value"], objective["ci_low"], objective["ci_high"])  # the eval's own interval
    text = output.files["postmortem_md"].read_text()
    assert text.startswith("# Post-mortem: full_auto.rules (full_auto), 48 records\n")
    assert f"- objective: {fmt_interval(pm.overall)}, n = 48" in text
    assert all(f"| {definition.name} |" in text for definition in FULL_AUTO_SLICES)
    assert "## Below the rest" in text and "## Cost" in text
    assert {s.slice for s in pm.slices} == {d.name for d in FULL_AUTO_SLICES}
    assert sum(s.n for s in pm.slices if s.slice == "label") == 48


def test_a_postmortem_that_fails_costs_the_eval_nothing(dataset, tmp_path, monkeypatch, capsys):
    import evals.postmortem

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(evals.postmortem, "post_mortem", broken)
    output = evaluate("rule", dataset, out_dir=tmp_path / "out", track=False, progress=False, n_resamples=50)
    assert (tmp_path / "out" / "metrics.json").is_file() and "postmortem_md" not in output.files
    stored = json.loads(output.files["postmortem"].read_text())
    assert stored == {"error": "post-mortem not computed: RuntimeError: boom"}
    assert "warning: post-mortem not computed: RuntimeError: boom" in capsys.readouterr().err
    with pytest.raises(ValueError, match="post-mortem not computed: RuntimeError: boom"):
        read_postmortem(output.files["postmortem"])


def test_read_postmortem_refuses_in_one_line_what_it_cannot_read(tmp_path):
    bad = tmp_path / JSON_FILE
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        read_postmortem(bad)
    bad.write_text(json.dumps({"kind": "full_auto"}))
    with pytest.raises(ValueError) as caught:
        read_postmortem(bad)
    assert "not a post-mortem of this version" in str(caught.value) and "\n" not in str(caught.value)
