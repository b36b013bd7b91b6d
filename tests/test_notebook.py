"""`notebooks/walkthrough.ipynb` runs top to bottom (nbclient), with the fake LM and with the embedded model."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "walkthrough.ipynb"


def execute(tmp_path: Path, monkeypatch, lm: str, timeout: int) -> nbformat.NotebookNode:
    """Execute the notebook in a fresh kernel (cwd notebooks/, outputs under tmp_path); returns it executed."""
    monkeypatch.setenv("GUIDEBENCH_NOTEBOOK_LM", lm)
    monkeypatch.setenv("GUIDEBENCH_NOTEBOOK_OUT", str(tmp_path / "notebook"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError naming the cell that failed
    return notebook


def check_outputs(notebook: nbformat.NotebookNode, out: Path) -> None:
    """The plots are inline, and the import, evals, leaderboard and export really wrote their files."""
    images = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # confusion matrices, calibration, leaderboard plots
    assert (out / "data" / "fullauto" / "dataset.json").is_file()
    assert (out / "evals" / "rule" / "metrics.json").is_file()
    assert (out / "reports" / "leaderboard" / "leaderboard.json").is_file()
    assert (out / "export" / "fullauto-notebook" / "checksums.sha256").is_file()
    assert (out / "loop" / "fullauto-decisions.jsonl").is_file()


def test_walkthrough_runs_with_the_fake_lm(tmp_path: Path, monkeypatch):
    notebook = execute(tmp_path, monkeypatch, "fake", timeout=600)
    check_outputs(notebook, tmp_path / "notebook")


@pytest.mark.slow
def test_walkthrough_runs_with_the_embedded_model(tmp_path: Path, monkeypatch):
    notebook = execute(tmp_path, monkeypatch, "local", timeout=1800)
    check_outputs(notebook, tmp_path / "notebook")
