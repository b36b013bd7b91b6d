"""Generate the CLI reference page (docs/cli.md) from the argparse parser itself."""

from __future__ import annotations

import argparse
import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

from guidebench.commands import build_parser

BEGIN = "<!-- cli-reference:begin -->"
END = "<!-- cli-reference:end -->"


def _help(parser: argparse.ArgumentParser) -> str:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        parser.print_help()
    return buffer.getvalue().rstrip()


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # argparse exposes subcommands only through this private list
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue  # an alias of a subcommand already listed
                seen.add(id(sub))
                found.append((name, sub))
    return found


def cli_reference() -> str:
    """Markdown of `guidebench --help` and every subcommand's help, nested commands included."""
    parser = build_parser()
    parts = ["```text", _help(parser), "```"]
    queue = [(f"guidebench {name}", sub) for name, sub in _subparsers(parser)]
    while queue:
        title, sub = queue.pop(0)
        parts += ["", f"#### `{title}`", "", "```text", _help(sub), "```"]
        queue[0:0] = [(f"{title} {name}", nested) for name, nested in _subparsers(sub)]
    # argparse wraps to the terminal width: fix it so the reference is the same everywhere.
    return "\n".join(parts)


def update_reference(path: Path) -> bool:
    """Rewrite the reference between the markers in a page; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: markers {BEGIN} / {END} not found")
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END),
                 lambda _: f"{BEGIN}\n{cli_reference()}\n{END}", text, flags=re.S)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    import os

    os.environ["COLUMNS"] = "100"
    page = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/cli.md")
    changed = update_reference(page)
    print(f"{page}: CLI reference " + ("updated" if changed else "already up to date"))
