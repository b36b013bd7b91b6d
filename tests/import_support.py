"""What an import writes that must not depend on how it ran (one process, several, in shards, resumed after a
kill): the ids, the report but where it was written, the quarantines and the split files byte for byte."""

from __future__ import annotations

import json
from pathlib import Path


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
