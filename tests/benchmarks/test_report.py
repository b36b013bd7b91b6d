"""benchmarks/report.py: the one writer of a benchmark's section of reports/bench.md."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from benchmarks.report import REPORT, section, write_section


def test_rewriting_every_section_of_the_committed_page_with_its_own_text_changes_no_byte(tmp_path: Path) -> None:
    page = tmp_path / "bench.md"
    shutil.copy(REPORT, page)
    original = page.read_text(encoding="utf-8")
    markers = re.findall(r"<!-- (bench:[a-z]+) -->", original)
    assert {"bench:import", "bench:replay", "bench:scale", "bench:lm"} <= set(markers)
    for marker in markers:
        inner = original.split(f"<!-- {marker} -->\n", 1)[1].split(f"\n<!-- /{marker} -->", 1)[0]
        write_section(inner, page, marker)
    assert page.read_text(encoding="utf-8") == original


def test_a_section_is_replaced_in_place_and_a_new_one_appended(tmp_path: Path) -> None:
    page = tmp_path / "bench.md"
    page.write_text("# Benchmarks\n\n<!-- bench:a -->\nold\n<!-- /bench:a -->\n\nkept\n", encoding="utf-8")
    write_section("new\n\n", page, "bench:a")
    write_section("## B", page, "bench:b")
    assert page.read_text(encoding="utf-8") == (
        "# Benchmarks\n\n<!-- bench:a -->\nnew\n<!-- /bench:a -->\n\nkept\n\n" + section("## B", "bench:b") + "\n")


def test_a_missing_page_is_started(tmp_path: Path) -> None:
    page = tmp_path / "reports" / "bench.md"
    write_section("x", page, "bench:x")
    assert page.read_text(encoding="utf-8") == "# Benchmarks\n\n<!-- bench:x -->\nx\n<!-- /bench:x -->\n"
