"""What an import writes that must not depend on how it ran (one process, several, in shards, resumed after a
kill): the ids, the report but where it was written, the quarantines and the split files byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def import_outputs(folder: Path) -> dict[str, object]:
    """The comparable outputs of the import in `folder`."""
    report = json.loads((folder / "import_report.json").read_text(encoding="utf-8"))
    report.pop("out")
    info = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    info.pop("created_at")
    quarantines = {name: (folder / name).read_text(encoding="utf-8") for name in
                   ("quarantine.jsonl", "quarantine-side.jsonl") if (folder / name).exists()}
    arrow = {split: sorted(path.read_bytes() for path in (folder / split).glob("*.arrow"))
             for split in ("train", "dev", "test")}
    return {"report": json.dumps(report), "dataset": info, "quarantines": quarantines, "arrow": arrow}


def record_shard_runs(monkeypatch: Any) -> list[int]:
    """The indices of the shards an import runs in this process, in order (`guidebench.data.shards.UnitJob.run`)."""
    from guidebench.data import shards

    ran: list[int] = []
    run = shards.UnitJob.run
    monkeypatch.setattr(shards.UnitJob, "run", lambda self, unit, folder: (ran.append(unit.index),
                                                                           run(self, unit, folder)))
    return ran
