"""The dataset card `DIR/README.md`: what was imported, how it splits, what the labels say."""

from __future__ import annotations

from pathlib import Path

from evals.data import SPLITS, dataset_info

from guidebench.data.ingest import ImportReport

CARD_FILE = "README.md"
_TITLES = {
    "labels": "Outcome labels (action)",
    "label_sources": "Label sources",
    "logged_actions": "Logged actions (enforced, after guardrails)",
    "model_actions": "Model actions (before guardrails)",
    "guardrail_rules": "Guardrail rules seen",
    "config_sources": "Guardrail config source",
}


def _table(counts: dict[str, int], header: str) -> list[str]:
    total = sum(counts.values()) or 1
    lines = [f"| {header} | n | share |", "|---|---:|---:|"]
    for key, value in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"| {key} | {value} | {value / total:.1%} |")
    return lines


def render_card(directory: Path, report: ImportReport) -> str:
    """The card text for an imported dataset folder."""
    info = dataset_info(directory)
    lines = [
        f"# {report.kind} dataset `{info['dataset_id'][:12]}`",
        "",
        f"- dataset id: `{info['dataset_id']}`",
        f"- kind: `{info['kind']}`; imported from `{report.path}` with seed {info.get('seed')}",
        f"- created: {info.get('created_at')} by guidebench {info.get('guidebench_version')}",
        "",
        "## Splits (by group: no run or episode spans two splits)",
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
        "## Files",
        "",
        "- `dataset.json`: kind, dataset id, split sizes and hashes, seed, sources (with SHA-256)",
        "- `train/`, `dev/`, `test/`: Hugging Face `datasets` splits; columns `record_id`, `group_id`,"
        " `label`, `record` (the record's pydantic JSON)",
        "- `import_report.json`: every count above; `quarantine.jsonl`: lines that could not be imported"
        " (`{source, line, error, raw}`); `quarantine-side.jsonl` (when present): unusable lines of side files",
        "",
        "```python",
        "from evals.data import load_records",
        f"records = load_records({str(directory)!r}, split=\"train\")",
        "```",
        "",
    ]
    return "\n".join(lines)


def write_card(directory: Path, report: ImportReport) -> Path:
    """Write `DIR/README.md`."""
    path = Path(directory) / CARD_FILE
    path.write_text(render_card(Path(directory), report), encoding="utf-8")
    return path
