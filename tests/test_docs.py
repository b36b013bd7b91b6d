"""The README is a five-minute read that starts with the two commands; the manual builds as a site; the
architecture page's package map names only what the packages export."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

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
