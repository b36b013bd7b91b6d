"""The dataset card `DIR/README.md`, in the Hugging Face dataset-card layout.

A YAML header (`configs` with each split's data files, `dataset_info` with the typed features and
split sizes) that the Hub and `datasets.load_dataset(DIR)` read, then prose: what was imported, how
it splits, what the labels say, the format version and how to open the folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evals.columns import features as record_features
from evals.data import DATASET_FORMAT_VERSION, KINDS, REIMPORT_HINT, SPLITS, dataset_info

from guidebench.data.ingest import ImportReport

CARD_FILE = "README.md"
_TITLES = {
    "labels": "Outcome labels (action)",
    "label_sources": "Label sources",
    "logged_actions": "Logged actions (enforced, after guardrails)",
    "model_actions": "Model actions (before guardrails)",
    "guardrail_rules": "Guardrail rules seen",
    "config_sources": "Guardrail config source",
    "goal_sources": "Goal and threshold source (per record)",
}
_EXPLAINED = {
    "goal_sources": "How the goal and threshold target of each packet were found: `proven` by the record's own"
                    " log line (\"(above target N)\", or a valid attempt with `threshold_met: false` and no"
                    " target: the goal `best`); `target_inferred`: the line met a threshold the log does not"
                    " state, its value is inferred; `nearest_line`: the line carries no evidence (an invalid"
                    " attempt, an older line), the nearest line's is taken; `runner_default`: no line carries"
                    " evidence, the runner's defaults (`threshold`, 1363); `side_file`: from the simulator's"
                    " side file (`side_file_missing`: it has no line for the iteration). See docs/import.md.",
}


def _table(counts: dict[str, int], header: str) -> list[str]:
    total = sum(counts.values()) or 1
    lines = [f"| {header} | n | share |", "|---|---:|---:|"]
    for key, value in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"| {key} | {value} | {value / total:.1%} |")
    return lines


def _split_bytes(directory: Path, name: str) -> int:
    return sum(path.stat().st_size for path in (directory / name).glob("data-*.arrow"))


def card_metadata(directory: Path, info: dict[str, Any]) -> dict[str, Any]:
    """The YAML header of the card: configs with data files per split, features and split sizes."""
    features = record_features(KINDS[info["kind"]])
    sizes = {name: _split_bytes(directory, name) for name in SPLITS}
    return {
        "pretty_name": f"guidebench {info['kind']} decisions {info['dataset_id'][:12]}",
        "tags": ["guidebench", info["kind"], "dspy", "decision-records"],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": name, "path": f"{name}/data-*.arrow"} for name in SPLITS]}],
        "dataset_info": {
            "features": features._to_yaml_list(),
            "splits": [{"name": name, "num_bytes": sizes[name],
                        "num_examples": int(info["splits"].get(name, {}).get("n", 0))} for name in SPLITS],
            "dataset_size": sum(sizes.values()),
        },
    }


def _header(directory: Path, info: dict[str, Any]) -> list[str]:
    text = yaml.safe_dump(card_metadata(directory, info), sort_keys=False, allow_unicode=True, width=1000)
    return ["---", *text.rstrip("\n").splitlines(), "---", ""]


def render_card(directory: Path, report: ImportReport) -> str:
    """The card text for an imported dataset folder."""
    info = dataset_info(directory)
    shown = report.out or str(directory)  # an import writes aside, then renames into --out: name --out
    record = "DecisionRecord" if info["kind"] == "fullauto" else "PlannerRecord"
    lines = [
        *_header(directory, info),
        f"# {report.kind} dataset `{info['dataset_id'][:12]}`",
        "",
        f"Decision records of the {'Full Auto loop' if info['kind'] == 'fullauto' else 'kernel-optimization planner'}"
        f" (`runtime.records.{record}`), made by `guidebench data import` from the logs at `{report.path}`:"
        " every line validated against the pydantic models, the lines that did not go to the quarantine,"
        " secrets in free text redacted, outcome labels attached with their source, and the records split by"
        " group with a seed.",
        "",
        f"- dataset id: `{info['dataset_id']}`",
        f"- kind: `{info['kind']}`; imported from `{report.path}` with seed {info.get('seed')}",
        f"- format version: {info.get('format_version', DATASET_FORMAT_VERSION)}",
        f"- created: {info.get('created_at')} by guidebench {info.get('guidebench_version')}",
        "",
        f"## Splits (by group: no {'thread' if info['kind'] == 'fullauto' else 'episode'} spans two splits)",
        "",
        "| split | records | hash |",
        "|---|---:|---|",
    ]
    for name in SPLITS:
        split = info["splits"].get(name, {})
        lines.append(f"| {name} | {split.get('n', 0)} | `{str(split.get('hash', ''))[:16]}` |")
    lines += ["", "## Import counts", "", "| count | n |", "|---|---:|"]
    counts = {"read": report.read, "imported": report.imported, "quarantined": report.quarantined,
              "duplicates": report.duplicates, "blank_lines": report.blank_lines, "redactions": report.redactions,
              "side_quarantined": report.side_quarantined, **report.extra_counts()}
    lines += [f"| {key} | {value} |" for key, value in counts.items()]
    lines += ["", f"Line policy: {report.line_policy}."]
    if report.redactions_by_kind:
        lines += ["", "Redactions by kind: " + ", ".join(f"{k} {v}" for k, v in report.redactions_by_kind.items())]
    for name, distribution in report.distributions.items():
        if name.startswith("labels_") or not distribution:
            continue
        lines += ["", f"## {_TITLES.get(name, name.replace('_', ' ').capitalize())}", ""]
        lines += [_EXPLAINED[name], ""] if name in _EXPLAINED else []
        lines += _table(distribution, name.rstrip("s") if name != "labels" else "label")
    label_names = sorted({key for name in SPLITS for key in report.distributions.get(f"labels_{name}", {})})
    if label_names:
        lines += ["", "## Labels by split", "", "| split | " + " | ".join(label_names) + " |",
                  "|---|" + "---:|" * len(label_names)]
        for name in SPLITS:
            split_counts = report.distributions.get(f"labels_{name}", {})
            lines.append(f"| {name} | " + " | ".join(str(split_counts.get(k, 0)) for k in label_names) + " |")
    lines += [
        "",
        "## Columns",
        "",
        f"`record_id`, `group_id` (the {'thread' if info['kind'] == 'fullauto' else 'episode'} that decides the split),"
        f" then every other field of `{record}` as a typed column, declared from the pydantic model"
        " (`evals.columns`): nested structs and lists for the turn summary, the guardrail config, the logged"
        " decision and its audit, the label with its source; free-form JSON (raw predictions, diagnostics,"
        " packet parts keyed by name) as JSON text; `_extra` holds, as JSON, the keys a model keeps beyond its"
        " declared fields. `dataset_info.features` in the header above lists every column with its type.",
        "",
        "## Format version",
        "",
        f"Format version {DATASET_FORMAT_VERSION} (recorded as `format_version` in `dataset.json`) stores the records'"
        " fields as typed columns. Version 1 stored each record as one JSON string in a `record` column, next to"
        " `record_id`, `group_id` and `label`; guidebench refuses such a folder with a one-line message. Re-import"
        " the logs to convert it: `"
        + REIMPORT_HINT.replace("LOGS", report.path).replace("DIR", f"{shown} --kind {info['kind']} --force")
        + "`. The dataset id and split hashes are computed from each"
        " record's canonical JSON, as before: the same logs give the same ids in both versions.",
        "",
        "## Files",
        "",
        "- `dataset.json`: kind, format version, dataset id, split sizes and hashes, seed, sources (with SHA-256)",
        "- `train/`, `dev/`, `test/`: Hugging Face `datasets` splits (`DatasetDict.save_to_disk`)",
        "- `import_report.json`: every count above; `quarantine.jsonl`: lines that could not be imported"
        " (`{source, line, error, raw}`); `quarantine-side.jsonl` (when present): unusable lines of side files",
        "",
        "## Use",
        "",
        "```python",
        "import datasets",
        f"splits = datasets.load_from_disk({report.out or str(directory)!r})",
        "test = splits[\"test\"].flatten().to_pandas()  # one column per field: summary.last_turn_status, label.action, ...",
        "",
        "from evals.data import load_records  # the same rows as validated pydantic records",
        f"records = load_records({report.out or str(directory)!r}, split=\"train\")",
        "```",
        "",
    ]
    return "\n".join(lines)


def write_card(directory: Path, report: ImportReport) -> Path:
    """Write `DIR/README.md`."""
    path = Path(directory) / CARD_FILE
    path.write_text(render_card(Path(directory), report), encoding="utf-8")
    return path
