"""The CLI reference page (docs/cli.md) is the CLI's own help, regenerated whenever a command changes."""

from __future__ import annotations

from pathlib import Path

from guidebench.commands.reference import BEGIN, END, cli_reference

PAGE = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


def test_cli_reference_is_current(monkeypatch):
    # argparse wraps help to the terminal width: the reference is generated at 100 columns.
    monkeypatch.setenv("COLUMNS", "100")
    text = PAGE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/cli.md lacks the cli-reference markers"
    current = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert current == cli_reference().strip(), (
        "docs/cli.md is stale: run `COLUMNS=100 .venv/bin/python -m guidebench.commands.reference docs/cli.md`")
