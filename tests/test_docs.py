"""The README is a five-minute read that starts with the two commands; the manual builds as a site; the
architecture page's package map names only what the packages export."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_readme_stays_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the manual to docs/"


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")

    targets = [t for t in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in t]
    assert targets, "the README links its docs pages"
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_mkdocs_builds_strict(tmp_path):
    # --strict turns every warning (a broken link, a page missing from nav) into a failure.
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                             "--config-file", str(REPO / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "architecture" / "index.html").is_file()
    shutil.rmtree(tmp_path / "site")


def test_the_package_map_names_only_what_each_package_exports():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10, "docs/architecture.md lost its package map"
    for package_cell, _, names_cell in rows:
        package = re.match(r"\| `([\w.]+)`", package_cell).group(1)
        exported = set(importlib.import_module(package).__all__)
        listed = set(re.findall(r"`(\w+)`", names_cell))
        assert listed, f"{package}: no public names listed"
        assert listed <= exported, f"{package}: the map lists names it does not export: {sorted(listed - exported)}"


# ----- the production snippet: from a logged line to a decision ------------------------------------

def _python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, dedented (the README's sit inside a list item)."""
    import textwrap

    found = re.findall(r"^([ \t]*)```python\n(.*?)^\1```", path.read_text(encoding="utf-8"), re.M | re.S)
    return [textwrap.dedent(block) for _indent, block in found]


def _load_frozen_snippets() -> list[tuple[str, str]]:
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    return [(page.name, block) for page in pages for block in _python_blocks(page) if "load_frozen(" in block]


def _production_snippets() -> list[tuple[str, str]]:
    return [(name, block) for name, block in _load_frozen_snippets() if "program=" not in block]


def _run_snippet(name: str, code: str, folder: Path, monkeypatch) -> dict:
    """Run a snippet where it would run: next to the sample logs and an export at exports/fullauto-guidance."""
    from frozen_support import export_program

    (folder / "datasets").symlink_to(REPO / "datasets")
    export_program("full_auto.predict", folder / "exports" / "fullauto-guidance", name="fullauto-guidance")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(folder / "home"))
    namespace: dict = {"__name__": "__snippet__"}
    exec(compile(code, f"<{name} production snippet>", "exec"), namespace)  # noqa: S102 (the documented code)
    return namespace


def _check_decision(namespace: dict) -> None:
    from runtime import ACTIONS, DecisionRecord, GuardrailConfig

    enforced, audit, record, line = (namespace[k] for k in ("enforced", "audit", "record", "line"))
    assert enforced.action in ACTIONS and audit.enforced_action == enforced.action
    assert isinstance(record, DecisionRecord) and record.summary.turn_id == line["turn_id"]
    assert record.config == namespace["run"].guardrail_config() and isinstance(record.config, GuardrailConfig)
    assert record.usage is not None and record.usage.total_tokens > 0, "the decision came from the LM"


def test_the_docs_show_the_production_snippet():
    assert {name for name, _ in _production_snippets()} >= {"README.md", "workflow.md"}


def test_the_production_snippet_runs_from_a_logged_line_to_a_decision(tmp_path, monkeypatch, capsys):
    # With the fake LM in place of the embedded one (the only change to the documented code).
    for index, (name, code) in enumerate(_production_snippets()):
        assert code.count('make_lm("local")') == 1, f"{name}: the snippet names its LM once"
        folder = tmp_path / str(index)
        folder.mkdir()
        namespace = _run_snippet(name, code.replace('make_lm("local")', 'make_lm("fake")'), folder, monkeypatch)
        _check_decision(namespace)
        assert not namespace["enforced"].parse_errors, "the fake LM answers in the adapter's format"
        assert capsys.readouterr().out.split()[0] == namespace["enforced"].action


@pytest.mark.slow
def test_the_production_snippet_runs_as_written_with_the_embedded_model(tmp_path, monkeypatch):
    from guidebench.demo import share_model_files

    share_model_files(tmp_path / "home")  # the model file assembled once per machine, not once per test
    name, code = _production_snippets()[0]
    _check_decision(_run_snippet(name, code, tmp_path, monkeypatch))


def test_the_installed_program_snippet_runs_as_written(tmp_path, monkeypatch):
    # The page's own export path and program: an export of that program there, the snippet as written.
    from frozen_support import export_program
    from runtime import ACTIONS

    snippets = [(name, code) for name, code in _load_frozen_snippets() if "program=" in code]
    assert [name for name, _ in snippets] == ["workflow.md"]
    name, code = snippets[0]
    folder, entry = re.search(r'load_frozen\("([^"]+)", program=programs\.get\("([^"]+)"\)\)', code).groups()
    export_program(entry, tmp_path / folder, name=Path(folder).name)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__snippet__"}
    exec(compile(code, f"<{name} installed-program snippet>", "exec"), namespace)  # noqa: S102 (the documented code)
    line = (REPO / "datasets" / "sample" / "fullauto" / "fullauto-decisions.jsonl").read_text().splitlines()[0]
    enforced, _, record = namespace["module"](json.loads(line)["summary"])
    assert enforced.action in ACTIONS and record.model == f"program:{entry}"


def _shadow_snippets() -> list[tuple[str, str]]:
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    return [(page.name, block) for page in pages for block in _python_blocks(page) if "ShadowRunner(" in block]


def test_the_shadow_snippet_writes_one_joinable_line_per_decision(tmp_path, monkeypatch, capsys):
    """The production guide's shadow snippet, as written, with a trained candidate at exports/fullauto-candidate."""

    import programs
    from evals import metrics_fullauto
    from frozen_support import export_program
    from optimizer_support import decision_examples
    from optimizers.fitting import FitSettings, fit_model
    from runtime import ShadowDecisionLine

    snippets = _shadow_snippets()
    assert {name for name, _ in snippets} >= {"workflow.md"}
    learned = programs.get("full_auto.learned")
    learned.trained_model.set_model(fit_model(decision_examples(16), decision_examples(8, offset=100),
                                              metrics_fullauto.metric,
                                              FitSettings(C=(1.0,), class_weight=("none",), folds=0)).model)
    (tmp_path / "state.json").write_text(json.dumps(learned.dump_state()), encoding="utf-8")
    for index, (name, code) in enumerate(snippets):
        folder = tmp_path / str(index)
        (folder / "datasets").mkdir(parents=True)
        (folder / "datasets" / "sample").symlink_to(REPO / "datasets" / "sample")
        export_program("full_auto.learned", folder / "exports" / "fullauto-candidate", state=tmp_path / "state.json")
        monkeypatch.chdir(folder)
        exec(compile(code, f"<{name} shadow snippet>", "exec"), {"__name__": "__snippet__"})  # noqa: S102
        written = (folder / "runs" / "shadowed" / "shadow-decisions.jsonl").read_text(encoding="utf-8").splitlines()
        with open(REPO / "datasets" / "sample" / "fullauto" / "fullauto-decisions.jsonl", encoding="utf-8") as log:
            first = [json.loads(next(log)) for _ in range(20)]
        lines = [ShadowDecisionLine.model_validate_json(text) for text in written]
        assert [(l.run_id, l.turn_id) for l in lines] == [(d["run_id"], d["turn_id"]) for d in first]
        assert {l.status for l in lines} == {"ok"} and capsys.readouterr().out.startswith("20 lines")


# ----- the README's by-hand path ------------------------------------------------------------------

def _tour_commands() -> list[list[str]]:
    """The `guidebench ...` commands of the README's "A five-minute tour" block, as written."""
    import shlex

    text = README.read_text(encoding="utf-8")
    block = text.split("By hand, the same path is:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _takes_lm(command: str) -> bool:
    import argparse

    from guidebench.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return any("--lm" in action.option_strings for action in commands.choices[command]._actions)


def test_the_readme_path_runs_as_written(tmp_path, monkeypatch, capsys):
    # Where a fresh clone runs it: the committed sample logs and reports beside it. Each command exactly as
    # written, with `--lm fake` added where it takes an LM, and RUN_ID the run the compile names.
    import dspy

    from guidebench.cli import main

    commands = _tour_commands()
    assert [words[:2] for words in commands] == [["guidebench", "data"], ["guidebench", "baselines"],
                                                 ["guidebench", "compile"], ["guidebench", "leaderboard"],
                                                 ["guidebench", "export"], ["guidebench", "promote"]]
    (tmp_path / "datasets").symlink_to(REPO / "datasets")
    shutil.copytree(REPO / "reports", tmp_path / "reports")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / ".guidebench"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_id, previous_lm, calling = None, dspy.settings.lm, []
    try:
        for words in commands:
            argv = [run_id if word == "RUN_ID" else word for word in words[1:]]
            if _takes_lm(argv[0]):
                argv += ["--lm", "fake"]
            code = main(argv)
            out = capsys.readouterr().out
            allowed = (0, 1) if argv[0] == "promote" else (0,)  # promote exits 1 when the gates say no
            assert code in allowed, f"{' '.join(words)} exited {code}:\n{out[-2000:]}"
            if out.startswith("LM fake (deterministic"):  # the LM and its cost come first
                calling.append(argv[0])
            if argv[0] == "compile":
                last = out.strip().splitlines()[-1]
                run_id = last.split()[2].rstrip(";")
                assert f"export it with: guidebench export {run_id} " in last, last
    finally:
        dspy.configure(lm=previous_lm)
    # The README says which of its commands run the embedded model as written: those that call an LM.
    said = re.search(r"As written, (.+?) run the embedded model", README.read_text(encoding="utf-8")).group(1)
    assert calling == re.findall(r"`(\w+)`", said) == ["baselines", "compile", "promote"]
    assert (tmp_path / "exports" / "fullauto-guidance" / "manifest.json").is_file()
    from evals.data import dataset_info

    n_test = dataset_info(tmp_path / "runs" / "data" / "fullauto")["splits"]["test"]["n"]
    assert n_test == 170  # the sample's test split (threads placed by a hash of their id with the seed)
    assert "\nfullauto-guidance@1.0.0: " in out and f"evidence: {n_test} records of split test" in out, out


# ----- the planner shadow's example, as a script ----------------------------------------------------

GUARD = 'if __name__ == "__main__":'


def _planner_shadow_example(folder: Path) -> str:
    """docs/planner-shadow.md's PlannerShadow example, with what it reads in place under `folder`: the deployed
    export, the candidate's, and the packet the loop runner archived for iteration 7."""
    from frozen_support import export_program
    from planner_sidecar_support import EXPLORING, logs_with_sidecars

    blocks = [b for b in _python_blocks(REPO / "docs" / "planner-shadow.md") if "PlannerShadow(" in b]
    assert len(blocks) == 1 and GUARD in blocks[0]
    export_program("planner.rules", folder / "exports" / "planner-explore", name="planner-explore",
                   exploration=EXPLORING)
    export_program("planner.rules", folder / "exports" / "candidate", name="candidate")
    _, records = logs_with_sidecars(folder / "sim", episodes=1, iterations=8)
    archive = folder / ".advisor" / "manual_archive" / "iter_0007"
    archive.mkdir(parents=True)
    (archive / "packet.json").write_text(json.dumps(records[6].packet.model_dump(mode="json"), indent=2,
                                                    sort_keys=True) + "\n", encoding="utf-8")
    return blocks[0]


def test_the_planner_shadow_example_runs_as_a_script_and_without_its_guard_says_why(tmp_path):
    from kill_support import guidebench_env
    from runtime.planner_log import PLANNER_FILE, PlannerDecisionLine

    code = _planner_shadow_example(tmp_path)
    (tmp_path / "example.py").write_text(code, encoding="utf-8")
    env = guidebench_env(tmp_path / "home")
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "family:schedule" in done.stdout
    lines = (tmp_path / "experiments" / PLANNER_FILE).read_text(encoding="utf-8").splitlines()
    line = PlannerDecisionLine.model_validate_json(lines[0])
    assert len(lines) == 1 and line.iteration_id == 7 and line.candidate.status == "ok"

    # As a script without the guard: the candidate's process imports it again; refused in one line that says why
    unguarded = code.replace(GUARD, "if True:")
    (tmp_path / "unguarded.py").write_text(unguarded, encoding="utf-8")
    failed = subprocess.run([sys.executable, "unguarded.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    last = failed.stderr.strip().splitlines()[-1]
    assert failed.returncode != 0 and "FrozenModuleError" in last
    assert f"start it under `{GUARD}`" in last, failed.stderr[-3000:]
