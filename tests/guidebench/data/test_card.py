"""The dataset card: a Hugging Face dataset-card YAML header, then prose on how the data was made."""

from __future__ import annotations

from pathlib import Path

import yaml

from evals.columns import features
from evals.data import DATASET_FORMAT_VERSION, SPLITS, dataset_info
from runtime.records import PlannerRecord

REPO = Path(__file__).resolve().parents[3]


def _header(card: str) -> dict:
    assert card.startswith("---\n")
    head, _, _ = card[4:].partition("\n---\n")
    return yaml.safe_load(head)


def test_card_header_declares_configs_and_features_that_hugging_face_reads(tmp_path: Path) -> None:
    import datasets
    from datasets import Features
    from huggingface_hub import DatasetCard

    from guidebench.data import import_logs

    out = tmp_path / "ex"
    import_logs(REPO / "datasets" / "sample" / "experiments", "experiments", out, progress=False)
    card = (out / "README.md").read_text(encoding="utf-8")
    meta = _header(card)
    assert meta["configs"] == [{"config_name": "default", "data_files": [
        {"split": name, "path": f"{name}/data-*.arrow"} for name in SPLITS]}]
    assert Features._from_yaml_list(meta["dataset_info"]["features"]) == features(PlannerRecord)
    info = dataset_info(out)
    assert {s["name"]: s["num_examples"] for s in meta["dataset_info"]["splits"]} == \
        {name: info["splits"][name]["n"] for name in SPLITS}
    assert DatasetCard.load(out / "README.md").data.to_dict()["configs"] == meta["configs"]
    # The prose says how it was made and what changed with the format version.
    assert "guidebench data import" in card and f"Format version {DATASET_FORMAT_VERSION}" in card
    assert f"--out {out} --kind experiments --force" in card
    # `load_dataset` follows the header to the same typed rows as `load_from_disk`.
    loaded = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
    saved = datasets.load_from_disk(str(out))
    for name in SPLITS:
        assert loaded[name].features == saved[name].features
        assert loaded[name].to_list() == saved[name].to_list()
