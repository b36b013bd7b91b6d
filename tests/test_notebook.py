"""`notebooks/walkthrough.ipynb` runs top to bottom (nbclient), once per test run: with the embedded model, or with
the fake LM when the run deselects the slow tests (`make test-fast`).

The notebook follows the quick demo's plan (its data, the trained model and the cascade), whose every step the
demo's own real-model test checks in detail; this test checks the walkthrough itself: every cell runs, the plots
are inline, the commands wrote their files.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "walkthrough.ipynb"


def notebook_lm(config: pytest.Config) -> str:
    """The embedded model, unless this run deselects slow tests (`-m "not slow"`): then the fake LM."""
    return "fake" if "not slow" in (config.getoption("markexpr") or "") else "local"


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
    """The plots are inline, and the import, evals, compiles, leaderboard and export really wrote their files."""
    images = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # confusion matrices, calibration, leaderboard plots
    assert (out / "data" / "fullauto" / "dataset.json").is_file()
    assert (out / "evals" / "rule" / "metrics.json").is_file()
    for compiled in ("learned", "cascade"):
        assert (out / "compiles" / compiled / "test" / "metrics.json").is_file()
    assert (out / "reports" / "leaderboard" / "leaderboard.json").is_file()
    assert (out / "export" / "fullauto-notebook" / "checksums.sha256").is_file()
    assert (out / "loop" / "fullauto-decisions.jsonl").is_file()


def test_walkthrough_runs_top_to_bottom(tmp_path: Path, monkeypatch, request):
    lm = notebook_lm(request.config)
    notebook = execute(tmp_path, monkeypatch, lm, timeout=600 if lm == "fake" else 1800)
    check_outputs(notebook, tmp_path / "notebook")
