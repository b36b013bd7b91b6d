"""The README's CLI reference is the CLI's own help, regenerated whenever a command changes."""

from __future__ import annotations

from pathlib import Path

from guidebench.cli_reference import BEGIN, END, cli_reference

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_commands():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make demo", "make test"]


def test_readme_cli_reference_is_current(monkeypatch):
    # argparse wraps help to the terminal width: the reference is generated at 100 columns.
    monkeypatch.setenv("COLUMNS", "100")
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "README lacks the cli-reference markers"
    current = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert current == cli_reference().strip(), (
        "README's CLI reference is stale: run `COLUMNS=100 .venv/bin/python -m guidebench.cli_reference README.md`")
