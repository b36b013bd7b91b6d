"""One program's evaluation on one frozen split: what it reads (`inputs`), the replay and its files (`run`), the
plots (`plots`), the post-mortem (`postmortem`), a planner dataset's outcome and propensity models that estimate
the cycles a directive gains (`outcome_models`), and train examples read back from their split on first use
(`stored_examples`, what a trained planner's compile holds), and a compile's inputs: a dataset's splits as examples
and its records' identities (`compile_inputs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.evaluation.inputs import EvalData, LoadedProgram, load_eval_data, load_export, load_program
    from guidebench.evaluation.run import EvalOutput, evaluate, summary_table, write_outputs
    from guidebench.evaluation.postmortem import write_postmortem
    from guidebench.evaluation.outcome_models import DatasetModels, cycles_for, models_for
    from guidebench.evaluation.compile_inputs import CompileData, RecordKey, load_compile_data

_WHERE: dict[str, str] = {
    "EvalData": "inputs", "LoadedProgram": "inputs", "load_eval_data": "inputs", "load_export": "inputs",
    "load_program": "inputs",
    "EvalOutput": "run", "evaluate": "run", "summary_table": "run", "write_outputs": "run",
    "write_postmortem": "postmortem",
    "DatasetModels": "outcome_models", "cycles_for": "outcome_models", "models_for": "outcome_models",
    "CompileData": "compile_inputs", "RecordKey": "compile_inputs", "load_compile_data": "compile_inputs",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
