"""Scoring decision programs: replay of records through a program, the dataset folder replay reads, statistics,
the post-mortem (slices, their tests), LM usage accounting, the simulated kernel environment the planner
metric needs, where the planner metric's improvement estimate comes from (`cycles`) and the off-policy
estimators (`evals.offpolicy`).

The public names below are re-exported lazily (`runtime._lazy`): `import evals` costs nothing, and each submodule
(with its pandas, scipy or `datasets` imports) loads on first use. Three names stay modules: the two metrics,
`evals.metrics_fullauto` and `evals.metrics_planner` (each has `metric`, `gepa_metric`, `aggregate`...), and
`evals.replay`, whose function is `evals.replay.replay`: importing a submodule sets the package attribute of its
name, so the package cannot also export a function called `replay`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from evals.replay import compare, ReplayResult
    from evals.data import (save_dataset, write_dataset, load_records, iter_records, dataset_info, split_hash,
                            DatasetRow, DatasetFormatError, SPLITS)
    from evals.stats import Statistic, MetricValue, bootstrap_mean
    from evals.paired import PairedComparison, paired_mean_difference, mcnemar, min_records_for
    from evals.usage import LMCall, UsageLedger, track_calls, record_call, instrument
    from evals.sim_kernel import KernelState, state_from_profile, apply_directive
    from evals.cycles import CyclesModel, LearnedCycles, SimulatorCycles, choose_cycles_model
    from evals.slices import SLICES, SliceDef, slice_values
    from evals.slice_tests import below_rest_p, benjamini_hochberg, cost_fence, shared_intervals
    from evals.postmortem import ChallengerSlices, PostMortem, compare_slices, post_mortem, read_postmortem
    from evals.sequential import ConfidenceSequence, SequentialVerdict, confidence_sequence, sequential_verdict
    from evals.shadow import ShadowPairs, paired_turns

_WHERE: dict[str, str] = {
    "compare": "replay", "ReplayResult": "replay",
    "save_dataset": "data", "write_dataset": "data", "load_records": "data", "iter_records": "data",
    "dataset_info": "data", "split_hash": "data", "DatasetRow": "data", "DatasetFormatError": "data", "SPLITS": "data",
    "Statistic": "stats", "MetricValue": "stats", "bootstrap_mean": "stats",
    "PairedComparison": "paired", "paired_mean_difference": "paired", "mcnemar": "paired", "min_records_for": "paired",
    "LMCall": "usage", "UsageLedger": "usage", "track_calls": "usage", "record_call": "usage", "instrument": "usage",
    "KernelState": "sim_kernel", "state_from_profile": "sim_kernel", "apply_directive": "sim_kernel",
    "CyclesModel": "cycles", "LearnedCycles": "cycles", "SimulatorCycles": "cycles",
    "choose_cycles_model": "cycles",
    "SLICES": "slices", "SliceDef": "slices", "slice_values": "slices",
    "below_rest_p": "slice_tests", "benjamini_hochberg": "slice_tests", "cost_fence": "slice_tests",
    "shared_intervals": "slice_tests",
    "ChallengerSlices": "postmortem", "PostMortem": "postmortem", "compare_slices": "postmortem",
    "post_mortem": "postmortem", "read_postmortem": "postmortem",
    "ConfidenceSequence": "sequential", "SequentialVerdict": "sequential", "confidence_sequence": "sequential",
    "sequential_verdict": "sequential",
    "ShadowPairs": "shadow", "paired_turns": "shadow",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
