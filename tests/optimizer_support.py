"""Small labeled Full Auto and planner data for optimizer, search, compile and program tests."""

from __future__ import annotations

import os
from pathlib import Path

import dspy

import programs
from evals import metrics_fullauto
from evals.data import save_dataset
from runtime import ExperimentLogEntry, FullAutoTurnSummary, GuardrailConfig, PerformanceProfile, PlannerRecord
from runtime.records import DecisionRecord, OutcomeLabel

# Four situations, each with one right action: failed -> stop, approvals pending -> pause,
# plan finished -> stop, otherwise continue.
_CASES = (
    ("failed", "", "1. fix the build (failed)", "compile error in parser.py", "stop"),
    ("completed", "1", "1. apply migration (waiting for approval)", "migrations/0042.sql added", "pause"),
    ("completed", "", "1. write tests (done)\n2. update docs (done)", "docs/README.md updated", "stop"),
    ("completed", "", "1. add endpoint (done)\n2. add tests (in progress)", "api/routes.py +40 lines", "continue"),
)


def decision_records(n: int, offset: int = 0) -> list[DecisionRecord]:
    """n labeled decision records cycling through the four situations."""
    records = []
    for j in range(n):
        i = offset + j
        status, approvals, plan, diff, action = _CASES[i % len(_CASES)]
        summary = FullAutoTurnSummary(thread_id=f"thread-{i // 4}", turn_id=f"turn-{i}", last_turn_status=status,
                                      turn_error="build failed" if status == "failed" else "",
                                      pending_approvals=approvals, turn_plan=plan, diff_summary=f"{diff} (#{i})",
                                      token_usage='{"totalTokens": %d}' % (1000 + 37 * i), turn_count=3 + i % 5)
        label = OutcomeLabel(action=action, source="simulator", reason=f"The right action here is {action}.")
        records.append(DecisionRecord.build(summary, GuardrailConfig(), run_id=f"fullauto-run-{i // 4}",
                                            sequence_id=i, label=label))
    return records


def decision_examples(n: int, offset: int = 0) -> list[dspy.Example]:
    """Labeled examples of `decision_records`."""
    return [programs.decision_example(r) for r in decision_records(n, offset)]


def fussy_metric(example: dspy.Example, pred: dspy.Prediction, trace: object = None) -> float:
    """The Full Auto metric, made to tell candidates apart when every decision is right."""
    # The fake LM always decides right; scoring its reasons by length makes candidates differ.
    value = metrics_fullauto.metric(example, pred, trace)
    return value if trace is not None else value * (0.5 + 0.5 * (len(pred.reason) % 2))


def make_dataset(directory: Path, *, train: int = 12, dev: int = 6, test: int = 6) -> Path:
    """A Full Auto dataset folder with labeled train/dev/test splits."""
    save_dataset(directory, "fullauto", {"train": decision_records(train), "dev": decision_records(dev, 100),
                                         "test": decision_records(test, 200)})
    return directory



def episode_records(seed: int, index: int) -> list[PlannerRecord]:
    """Planner records of one simulated episode, packets rebuilt as the importer does."""
    from guidebench.data.planner_packets import PacketBuilder
    from guidebench.simulators.experiments import entry_line, simulate_episode

    episode = simulate_episode(seed, index)
    builder = PacketBuilder()
    records = []
    for item, side in zip(episode.entries, episode.side["iterations"]):
        pk = builder.packet(item, goal=side["goal"], threshold_target=side["threshold_target"],
                            profile=PerformanceProfile.model_validate(side["performance_profile"]))
        records.append(PlannerRecord(record_id=f"{episode.episode_id}-{item['iteration_id']}",
                                     episode_id=episode.episode_id, iteration_id=item["iteration_id"], packet=pk,
                                     outcome=ExperimentLogEntry.model_validate(item)))
        builder.add(item, entry_line(item))
    return records


def make_planner_dataset(directory: Path, seed: int = 5) -> Path:
    """A planner (experiments) dataset folder of simulated episodes: two for train, one each for dev and test."""
    save_dataset(directory, "experiments", {"train": episode_records(seed, 0) + episode_records(seed, 1),
                                            "dev": episode_records(seed, 2), "test": episode_records(seed, 3)})
    return directory

_STORE_TEMPLATE: list[Path] = []


def tracking_uri(directory: Path) -> str:
    """A fresh MLflow SQLite store in directory (copied from a migrated template: creating the schema
    takes MLflow ~15 s, once per test session)."""
    import shutil
    import tempfile

    import mlflow

    if not _STORE_TEMPLATE:
        import atexit

        # One per test process, removed when it exits: after the check that the session's temp folder is left
        # empty, so it is made beside pytest's own folders (tests/conftest.py).
        folder = tempfile.mkdtemp(prefix="mlflow-template-", dir=os.environ.get("PYTEST_DEBUG_TEMPROOT"))
        atexit.register(shutil.rmtree, folder, True)
        template = Path(folder) / "mlflow.db"
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()
        _STORE_TEMPLATE.append(template)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "mlflow.db"
    shutil.copyfile(_STORE_TEMPLATE[0], target)
    return f"sqlite:///{target}"
