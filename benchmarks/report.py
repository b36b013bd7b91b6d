"""The one writer of reports/bench.md: each benchmark owns a section between `<!-- NAME -->` markers.

`write_section(text, path, marker)` replaces that section (or appends it), keeping the rest of the page;
`section(text, marker)` is the block it writes, for a benchmark that prints it too.
"""

from __future__ import annotations

from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "reports" / "bench.md"


def section(text: str, marker: str) -> str:
    """The section as it stands in the page: the text between its two markers."""
    return f"<!-- {marker} -->\n{text.rstrip()}\n<!-- /{marker} -->"


def write_section(text: str, path: Path = REPORT, marker: str = "bench") -> None:
    """Replace the `marker` section of the page at `path` (append it when missing), keeping the rest."""
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    block = section(text, marker)
    current = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if start in current and end in current:
        head, rest = current.split(start, 1)
        _, tail = rest.split(end, 1)
        current = head + block + tail
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(current, encoding="utf-8")
