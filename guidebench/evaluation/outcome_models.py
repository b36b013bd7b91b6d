"""The planner dataset's outcome and propensity models: fit on train + dev once, cached, handed to the scorers.

The planner metrics need an estimate of what a directive brings where the logs carry no performance profile, and
the off-policy estimates need both models (`evals.offpolicy`). `evals` cannot fit (scikit-learn lives in
`optimizers`), so the application fits them here for a dataset (`optimizers.outcome_fitting`, on the train and
dev splits, as the `fit` recipe fits `planner.learned`: the models never see test) and caches their JSON under
`$GUIDEBENCH_HOME/outcome-models/`, keyed by the dataset id, the train and dev splits' hashes, the fit settings,
the seed and the features version. `guidebench eval`, `compile`, `leaderboard`, `search` and `promote` call
`cycles_for` with their `--cycles-model` choice (or auto); `offpolicy_summary` turns a
replay's rows into the estimates, calibration and (for `planner.logged`) the check against what was observed.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from guidebench.errors import GuidebenchError
from guidebench.home import guidebench_home

CYCLES_MODELS = ("auto", "sim", "learned")
CACHE_DIR = "outcome-models"
FIT_SPLITS = ("train", "dev")


@dataclass
class DatasetModels:
    """A dataset's fitted models, where they are cached and what they were fit on."""

    outcome: Any  # runtime.outcome.OutcomeModel
    propensity: Any  # evals.offpolicy.propensity.PropensityModel
    key: str
    path: Path
    chosen: dict[str, Any]
    from_cache: bool
    trained_on: str


@dataclass
class CyclesChoice:
    """What a command estimates the planner's improvement with, and why."""

    model: Any  # evals.cycles.CyclesModel: sim, learned or none
    models: Optional[DatasetModels]
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """`sim`, `learned` or `none`."""
        return self.model.name

    @property
    def context(self) -> str:
        """Which context the estimates rest on (the log summary, the performance profile for how many records)."""
        return next((note for note in reversed(self.notes) if note.startswith("context:")), "")

    @property
    def estimator(self) -> str:
        """How the outputs name the estimator (with the context its estimates rest on: `choose_cycles_model`)."""
        return self.model.estimator


def _key(dataset_id: str, hashes: dict[str, str], settings: Any, seed: int) -> str:
    from runtime.outcome_features import FEATURES_VERSION
    from runtime.records import canonical_json, sha256_hex

    return sha256_hex(canonical_json({"dataset_id": dataset_id, "splits": hashes, "settings": settings.key(),
                                      "seed": seed, "features_version": FEATURES_VERSION,
                                      "fit_entry": 2}))[:20]  # 2: the fit entry holds `family_calibration`


def _load(path: Path) -> Optional[tuple[Any, Any, dict[str, Any]]]:
    from evals.offpolicy.propensity import PropensityModel
    from runtime.outcome import OutcomeModel, OutcomeModelError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return OutcomeModel(data["outcome"]), PropensityModel(data["propensity"]), dict(data["chosen"])
    except (OSError, ValueError, KeyError, TypeError, OutcomeModelError):
        return None  # a damaged cache entry is fit again


def _save(path: Path, fitted: Any) -> None:
    """Cache a fit (readers see the old entry or the whole new one); a cache the disk refuses is only a warning."""
    from optimizers.checkpoint import atomic_write_text

    data = {"outcome": fitted.outcome.to_state(), "propensity": fitted.propensity.to_state(), "chosen": fitted.chosen}
    try:
        atomic_write_text(path, json.dumps(data))
    except OSError as exc:
        print(f"warning: the outcome models are not cached ({path}: {exc.strerror or exc}); they are fit again "
              "next time", file=sys.stderr)


# Models fit on records a caller was reading anyway (`models_for(records=...)`), by their cache key: the next
# `models_for` of the same dataset, seed and settings takes them as they were fit (a compile reads its train split
# once for its examples and for this fit, then asks `cycles_for` for its cycles model).
_HANDED: dict[str, DatasetModels] = {}


def models_for(dataset_dir: Path, *, seed: int = 0, cache: bool = True,
               records: Optional[dict[str, Iterable[Any]]] = None) -> DatasetModels:
    """The dataset's models fit on its train and dev splits (from the cache when fit before); OutcomeFitError when
    they cannot teach them, GuidebenchError when the folder cannot be read.

    `records`: the train and dev records, in stored order, the fit reads instead of streaming the splits again (a
    stream a caller reads for its own use too; it is left unread when the models come from the cache). Models fit
    on them are handed to the next call for the same dataset."""
    from evals.data import DatasetFormatError, dataset_info, iter_records
    from optimizers.outcome_fitting import OutcomeFitSettings, fit_outcome_models_once

    settings = OutcomeFitSettings()
    try:
        info = dataset_info(dataset_dir)
        splits = {name: info["splits"].get(name) or {} for name in FIT_SPLITS}
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    dataset_id = str(info.get("dataset_id", ""))
    key = _key(dataset_id, {name: str(split.get("hash", "")) for name, split in splits.items()}, settings, seed)
    path = guidebench_home() / CACHE_DIR / f"{key}.json"
    trained_on = (f"the train and dev splits of dataset {dataset_id[:12]} "
                  f"({sum(int(split.get('n', 0)) for split in splits.values())} records)")
    if records is None and key in _HANDED:
        return _HANDED.pop(key)
    loaded = _load(path) if cache and path.is_file() else None
    if loaded is not None:
        outcome, propensity, chosen = loaded
        return DatasetModels(outcome, propensity, key, path, chosen, True, trained_on)
    # Streamed: each record becomes its row of the fit and is let go (a year of logs is never held whole).
    given = records or {}
    streams = {name: given[name] if name in given else iter_records(dataset_dir, name) if split.get("n") else iter(())
               for name, split in splits.items()}
    try:
        fitted = fit_outcome_models_once(streams["train"], streams["dev"], settings, seed=seed)
    except DatasetFormatError as exc:
        raise GuidebenchError(str(exc)) from exc
    if cache:
        _save(path, fitted)
    models = DatasetModels(fitted.outcome, fitted.propensity, key, path, fitted.chosen, False, trained_on)
    if records is not None:
        _HANDED.clear()  # one at a time: a compile takes its own back at once
        _HANDED[key] = models
    return models


def cycles_for(choice: str, records: Sequence[Any], dataset_dir: Path, *, split: str, seed: int = 0,
               cache: bool = True) -> CyclesChoice:
    """The cycles model `--cycles-model` asks for on these planner records, with notes that never stay silent.

    `learned` refuses (GuidebenchError) when the train split cannot teach a model; `auto` then uses the simulator
    when every record carries a profile, else no model: the improvement metrics and the objective are left out,
    and the notes give the reason (one story: no note names a model that is not used).
    """
    from evals.cycles import LearnedCycles, choose_cycles_model
    from optimizers.outcome_fitting import OutcomeFitError

    if choice not in CYCLES_MODELS:
        raise GuidebenchError(f"--cycles-model {choice!r}: use one of {', '.join(CYCLES_MODELS)}")
    notes: list[str] = []
    models: Optional[DatasetModels] = None
    try:
        models = models_for(dataset_dir, seed=seed, cache=cache)
    except OutcomeFitError as exc:
        if choice == "learned":
            raise GuidebenchError(f"--cycles-model learned: cannot fit the outcome model on the train and dev "
                                  f"splits: {exc}") from None
        notes.append(f"no learned outcome model (train and dev splits): {exc}")
    learned = (LearnedCycles(models.outcome, trained_on=models.trained_on, fit_key=models.key)
               if models is not None else None)
    archived = sum(1 for r in records if getattr(r, "plan", None) is not None)
    model, more = choose_cycles_model([r.packet for r in records], choice, learned, archived=archived)
    notes += more
    if models is not None and split.split("[")[0] in (*FIT_SPLITS, "all"):
        notes.append(f"the outcome model was fit on {models.trained_on}, which this split includes: its estimates "
                     "here are in-sample (evaluate dev or test for an honest estimate)")
    return CyclesChoice(model=model, models=models, notes=notes)


def offpolicy_summary(records: Sequence[Any], rows: Sequence[dict[str, Any]], models: DatasetModels, *,
                      program: str, seed: int = 0, replays_log: bool = False, progress: bool = False) -> dict[str, Any]:
    """Off-policy estimates of a replay's choices (DM, IPW, DR), the outcome model's calibration on the logged
    attempts, and for the deployed planner (`replays_log`) the check of its estimate against what its attempts
    brought: its choices are the logging policy's own, so their weights are 1 (IPW and DR are the observed mean,
    and the direct method is what is checked). `progress`: a bar with its ETA over the records (their features and
    the models' predictions are what takes the time)."""
    from evals.offpolicy.bandit import LoggedBandit, choices_of
    from evals.offpolicy.summary import HEADLINE, calibration, extrapolation, observed_mean, policy_estimates

    bandit = LoggedBandit.build(records, models.outcome, models.propensity, progress=progress)
    scored = bandit.on_policy() if replays_log else bandit
    choices = choices_of(rows)
    estimates = policy_estimates(scored, choices, seed=seed)
    observed = observed_mean(bandit, seed=seed)
    summary: dict[str, Any] = {
        "headline": HEADLINE, "estimates": {name: e.model_dump() for name, e in estimates.items()},
        "observed_logged": observed.model_dump(), "calibration": calibration(bandit, seed=seed).model_dump(),
        "models": {"key": models.key, "trained_on": models.trained_on, "from_cache": models.from_cache,
                   "fit": models.chosen},
        # the records whose propensities the deployed planner logged: their weights use no propensity model
        "logged_propensities": {"n": len(bandit.logged_records), "of": bandit.n, "records": bandit.logged_records},
        # the records whose choice the deployed planner (almost) never made in such a state: model alone
        "extrapolation": extrapolation(scored, choices).model_dump(),
    }
    calibrated = (models.chosen or {}).get("family_calibration")
    if calibrated is not None:
        summary["family_calibration"] = calibrated
    if replays_log:
        summary["on_policy"] = True
        summary["logged_check"] = logged_check(estimates, observed)
    return summary


def logged_check(estimates: dict[str, Any], observed: Any) -> dict[str, Any]:
    """Whether each estimate of the deployed planner's improvement holds what its attempts brought (and vice versa)."""
    check = {}
    for name, estimate in estimates.items():
        inside = (estimate.value is not None and observed.value is not None and estimate.ci_low is not None
                  and estimate.ci_high is not None and estimate.ci_low <= observed.value <= estimate.ci_high)
        check[name] = {"estimate": estimate.value, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high,
                       "observed": observed.value, "observed_inside_interval": bool(inside)}
    return check


def describe(summary: dict[str, Any]) -> list[str]:
    """Plain lines of an off-policy summary, for the eval's printout."""
    lines = []
    for name, estimate in summary["estimates"].items():
        value = estimate["value"]
        text = (estimate["note"] or "unsupported" if value is None else
                f"{value:.1f} ({estimate['note']})" if estimate["ci_low"] is None else
                f"{value:.1f} [{estimate['ci_low']:.1f}, {estimate['ci_high']:.1f}]")
        lines.append(f"off-policy {name.upper():<4} {text}  (n {estimate['n']}, {estimate['n_episodes']} episodes, "
                     f"ESS {estimate['ess']:.1f}, support {estimate['support']:.0%})")
    logged = summary.get("logged_propensities") or {}
    if logged.get("n"):
        lines.append(f"logged propensities: {logged['n']} of {logged['of']} records (their weights use no "
                     "propensity model)")
    extra = summary.get("extrapolation")
    if extra and extra["n"]:
        from evals.offpolicy.summary import Extrapolation

        alone = ": those records' estimates rest on the outcome model alone" if extra["extrapolated"] else ""
        lines.append(f"off-policy {Extrapolation.model_validate(extra).text()}{alone}")
    calib = summary["calibration"]
    if calib["n"]:
        ratio = "n/a" if calib["mean_ratio"] is None else f"{calib['mean_ratio']:.2f}"
        corr = "n/a" if calib["correlation"] is None else f"{calib['correlation']:.2f}"
        lines.append(f"outcome model on the {calib['n']} logged attempts: mean predicted / observed {ratio}, "
                     f"correlation {corr}, bin coverage {calib['coverage']:.2f}")
    for name, row in (summary.get("logged_check") or {}).items():
        if row["estimate"] is not None and row["observed"] is not None and not math.isnan(row["observed"]) \
                and row["ci_low"] is not None:
            lines.append(f"check {name.upper()}: observed {row['observed']:.1f} "
                         f"{'inside' if row['observed_inside_interval'] else 'OUTSIDE'} "
                         f"[{row['ci_low']:.1f}, {row['ci_high']:.1f}]")
    lines += family_calibration_lines(summary.get("family_calibration"))
    return lines


def family_calibration_lines(calibrated: Optional[dict[str, Any]]) -> list[str]:
    """One line per family of the outcome model's held-out calibration (`optimizers.outcome_fitting`)."""
    if not calibrated:
        return []
    lines = []
    for family, row in (calibrated.get("families") or {}).items():
        ratio = "n/a" if row.get("ratio") is None else (
            f"{row['ratio']:.2f}" + (f" [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
                                    if row.get("ratio_low") is not None else " (too few episodes: no interval)"))
        lines.append(f"outcome model held out, {family.split(':')[-1]}: predicted / observed {ratio} "
                     f"(n {row['n']} attempts, {row['episodes']} episodes; predicted {row['predicted']:.4f}, "
                     f"observed {row['observed']:.4f} of the best)")
    return lines


__all__ = ["CYCLES_MODELS", "CyclesChoice", "DatasetModels", "cycles_for", "describe", "family_calibration_lines",
           "logged_check", "models_for", "offpolicy_summary"]
