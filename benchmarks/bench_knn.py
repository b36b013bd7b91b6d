"""KNN demo selection: the lexical default vectorizers against MiniLM, without any LM call.

For each vectorizer, the training examples of a dataset are indexed as `KNNFewShot` indexes them
(`optimizers.knn_fewshot.NearestDemos`), and for every dev example the k nearest training examples
are retrieved. Reported: how often the nearest demo's label equals the dev example's label
(the embedded model tends to copy the nearest demo, so this is close to what KNN demos can buy),
how often the majority label of the k demos does, the index build time and the time per query.
MiniLM is measured only where its optional extra is installed (`guidebench[minilm]`).

    .venv/bin/python -m benchmarks.bench_knn --data DIR [--k 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import programs
from evals.data import dataset_info, load_records
from optimizers.knn_fewshot import DEFAULT_FIELDS, NearestDemos
from optimizers.vectorizers import VECTORIZERS, VectorizerUnavailable

LABEL_FIELD = {"fullauto": "action", "experiments": "strategy_family"}


def measure(data: Path, k: int, fields: Optional[list[str]] = None) -> list[dict[str, Any]]:
    """One row per vectorizer: nearest/majority label agreement on dev, build and query time."""
    kind = dataset_info(data)["kind"]
    to_example = programs.decision_example if kind == "fullauto" else programs.planner_example
    program = programs.get("full_auto.predict" if kind == "fullauto" else "planner.predict")
    field = LABEL_FIELD[kind]
    train = [to_example(r) for r in load_records(data, "train")]
    dev = [to_example(r) for r in load_records(data, "dev")]
    rows = []
    import sklearn.feature_extraction.text  # noqa: F401  (import time is not index build time)

    for name in VECTORIZERS:
        knn = NearestDemos(program, train, k=k, vectorizer=name, nearest_last=False, fields=fields)
        started = time.perf_counter()
        try:
            knn._ensure_index()
        except VectorizerUnavailable as exc:
            rows.append({"vectorizer": name, "available": False, "note": str(exc)})
            continue
        built = time.perf_counter() - started
        nearest_hits = majority_hits = 0
        started = time.perf_counter()
        for example in dev:
            demos = knn.nearest(dict(example.inputs()))
            labels = [d.get(field) for d in demos]
            nearest_hits += labels[0] == example.get(field)
            majority_hits += Counter(labels).most_common(1)[0][0] == example.get(field)
        query = (time.perf_counter() - started) / max(1, len(dev))
        rows.append({"vectorizer": name, "available": True, "n_train": len(train), "n_dev": len(dev), "k": k,
                     "nearest_label_agreement": round(nearest_hits / len(dev), 4),
                     "majority_label_agreement": round(majority_hits / len(dev), 4),
                     "index_build_s": round(built, 3), "query_ms": round(1000 * query, 2)})
    base = Counter(d.get(field) for d in dev).most_common(1)[0]
    rows.append({"vectorizer": "(majority class, no retrieval)", "available": True,
                 "nearest_label_agreement": round(base[1] / len(dev), 4), "n_dev": len(dev)})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table."""
    lines = ["| vectorizer | nearest-demo label = dev label | majority of k demos = dev label | index build | per query |",
             "|---|---|---|---|---|"]
    for row in rows:
        if not row.get("available"):
            lines.append(f"| {row['vectorizer']} | not installed | | | |")
            continue
        lines.append(f"| {row['vectorizer']} | {row['nearest_label_agreement']:.3f} | "
                     f"{row.get('majority_label_agreement', float('nan')):.3f} | "
                     f"{row.get('index_build_s', 0):.2f} s | {row.get('query_ms', 0):.1f} ms |")
    return "\n".join(lines)


def main() -> None:
    """Measure and print the table (and JSON when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--fields", default=None,
                        help="comma-separated input fields to embed, or 'all' (default: the KNNFewShot recipe's)")
    args = parser.parse_args()
    fields = list(DEFAULT_FIELDS) if not args.fields else [] if args.fields == "all" else args.fields.split(",")
    rows = measure(args.data, args.k, fields)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
