"""Close the loop: drive the Full Auto simulator with a frozen module and write the original log layout.

Each simulated run goes events -> turn summary -> the module's decision -> guardrails (the run's
own config) -> dispatch, exactly as production. The simulator applies the same guardrails again to
dispatch; the two enforced decisions must agree, so a divergence is a bug, not a silent drift.
The logs name the module (`model`: `<package>` plus its LM) and keep its raw output and parse
diagnostics; the simulator's true labels go to the `labels.jsonl` side file, so
`guidebench data import LOGDIR --kind fullauto` reads the runs back as a labeled dataset.
LOGDIR follows `guidebench.outputs`: written beside it and renamed into place, so a crash never leaves half a log.

Without a module the simulator's own deployed policy decides (the noisy policy the sample logs come from). With
a shadow module (`shadow=DIR`), the candidate decides every turn beside the deciding program through
`runtime.shadow.ShadowRunner`, exactly as in production: never enforced, written to LOGDIR's
`shadow-decisions.jsonl` (whose lines hold wall-clock times and latencies: the same seed gives the same decision
logs, not the same sidecar); the promotion ledger records candidate -> shadow.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from guidebench.errors import GuidebenchError

@dataclass
class LoopSummary:
    """What a run-loop produced."""

    out: Path
    module: str
    runs: int = 0
    decisions: int = 0
    enforced_actions: Counter = field(default_factory=Counter)
    guardrail_overrides: int = 0
    parse_failures: int = 0
    seconds: float = 0.0
    shadow: Optional[str] = None
    shadow_counts: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """A few lines for the terminal."""
        actions = ", ".join(f"{a} {n}" for a, n in sorted(self.enforced_actions.items())) or "none"
        per = self.seconds / self.decisions if self.decisions else 0.0
        return (f"{self.module}: {self.runs} runs, {self.decisions} decisions ({actions}); "
                f"{self.guardrail_overrides} guardrail overrides, {self.parse_failures} parse failures; "
                f"{self.seconds:.1f} s ({per:.2f} s per decision)\n"
                + (f"shadow {self.shadow}: " + ", ".join(f"{key} {self.shadow_counts.get(key, 0)}" for key in
                                                         ("written", "ok", "invalid", "error", "timeout"))
                   + " shadow decisions (never enforced)\n" if self.shadow else "")
                + f"wrote {self.out}; import it with: guidebench data import {self.out} --kind fullauto --out DATASET")


def _module_label(module: Any) -> str:
    manifest = module.manifest
    if not manifest.uses_lm:
        return f"{manifest.package}:program:{manifest.entry}"
    import dspy

    lm = module.lm if module.lm is not None else dspy.settings.lm
    return f"{manifest.package}:{getattr(lm, 'model', 'unconfigured')}"


def _play(module: Any, episode: Any, label: str, summary: LoopSummary, overrides: dict[str, Any],
          shadow: Any = None) -> Any:
    """Play one episode to its end with the module (None: the simulator's deployed policy), the shadow deciding
    beside it; returns the finished SimRun."""
    from guidebench.simulators.fullauto import SimRun

    if overrides:
        episode.guardrails = episode.guardrails.model_copy(update=overrides)
        episode.run_file = episode.run_file.model_copy(update=overrides)
    if module is None:
        while not episode.done:
            result = episode.step(episode.deployed_decision())
            if shadow is not None:
                shadow.submit(episode.decision_lines[-1], episode.guardrails)
            summary.decisions += 1
            summary.enforced_actions[result.enforced.action] += 1
            summary.guardrail_overrides += int(result.audit.overridden)
            summary.parse_failures += int(result.model_decision.parse_failed)
        return SimRun(episode.run_file, episode.decision_lines, episode.raw_lines, episode.events, episode.labels)
    episode.run_file = episode.run_file.model_copy(update={"decision_model": label})
    raws: list[tuple[Any, Optional[dict[str, Any]]]] = []
    while not episode.done:
        observed = episode.observe()
        # the run's guardrail config is an input too, as in production (a trained model weighs its min_confidence)
        model_decision, raw, usage = module.decide(observed, episode.guardrails)
        decision, audit, record = module.enforce(observed, model_decision, episode.guardrails, raw=raw, usage=usage,
                                                 run_id=episode.run_id, sequence_id=episode.sequence + 1,
                                                 workspace_id=episode.config.workspace_id)
        # Dispatch with the model's own decision: the simulator enforces the same guardrails itself.
        result = episode.step(model_decision)
        if (result.enforced.action, result.audit.rule) != (decision.action, audit.rule):
            raise GuidebenchError(f"run {episode.run_id}: simulator enforced {result.enforced.action} "
                                  f"({result.audit.rule}) but the module enforced {decision.action} ({audit.rule})")
        raws.append((record.raw_prediction, record.parse_diagnostics))
        if shadow is not None:
            shadow.submit(episode.decision_lines[-1], episode.guardrails)
        summary.decisions += 1
        summary.enforced_actions[decision.action] += 1
        summary.guardrail_overrides += int(audit.overridden)
        summary.parse_failures += int(model_decision.parse_failed)
    decisions = [line.model_copy(update={"model": label}) for line in episode.decision_lines]
    raw_lines = [line.model_copy(update={"raw_prediction": raw, "parse_diagnostics": diagnostics})
                 for line, (raw, diagnostics) in zip(episode.raw_lines, raws)]
    return SimRun(episode.run_file, decisions, raw_lines, episode.events, episode.labels)


def run_loop(module_dir: Optional[Path], *, runs: int, seed: int, out: Path, lm: Optional[str] = None,
             max_turns: Optional[int] = None, min_confidence: Optional[float] = None, force: bool = False,
             shadow: Optional[Path] = None, shadow_deadline_s: float = 5.0, ledger: Any = None) -> LoopSummary:
    """Play `runs` seeded simulated runs with the frozen module (None: the simulator's deployed policy) deciding and
    the `shadow` module beside it; write their logs to `out`."""
    from guidebench.simulators.fullauto import FullAutoSimulator
    from guidebench.simulators.fullauto_world import DECISION_MODEL

    from guidebench.data.fullauto_writer import write_workspace

    from guidebench.outputs import check_input, claim_output

    if runs < 1:
        raise GuidebenchError(f"--runs {runs}: must be at least 1")
    inputs = [check_input(Path(folder), label, ("export",), "an exported module folder")
              for folder, label in ((module_dir, "--module"), (shadow, "--shadow")) if folder is not None]
    output = claim_output(Path(out), "run-loop", force=force, inputs=inputs)
    out = output.path
    module = _load(module_dir, lm) if module_dir is not None else None
    candidate = _load(shadow, lm) if shadow is not None else None
    overrides = {key: value for key, value in (("max_turns", max_turns), ("min_confidence", min_confidence))
                 if value is not None}
    label = _module_label(module) if module is not None else DECISION_MODEL
    summary = LoopSummary(out=out, module=module.manifest.package if module is not None else
                          f"the simulator's deployed policy ({DECISION_MODEL})",
                          shadow=candidate.manifest.package if candidate is not None else None)
    if candidate is not None:
        from guidebench.release.shadow import start_shadow

        start_shadow(Path(shadow), ledger=ledger)
    simulator = FullAutoSimulator(seed)
    started = time.perf_counter()
    with output.writing() as staged:
        runner = _shadow_runner(candidate, staged, shadow_deadline_s, lm)
        try:
            played = (_play(module, simulator.episode(index), label, summary, overrides, runner)
                      for index in range(runs))
            counts = write_workspace(staged, played, with_labels=True, total=runs, progress=False)
        finally:
            if runner is not None:
                runner.close()
                summary.shadow_counts = dict(runner.counts)
        summary.runs = counts.runs
    summary.seconds = time.perf_counter() - started
    return summary


def _load(module_dir: Path, lm: Optional[str]) -> Any:
    """An exported Full Auto module as the application runs it (its LM configured when it calls one)."""
    from guidebench.release.export import load_exported

    module = load_exported(Path(module_dir))
    if module.manifest.kind != "full_auto":
        raise GuidebenchError(f"{module_dir}: is a {module.manifest.kind} module; run-loop drives Full Auto modules")
    if module.manifest.uses_lm:
        from guidebench.lm.factory import configure_lm

        configure_lm(lm or "local")
    return module


def _shadow_runner(candidate: Any, folder: Path, deadline_s: float, lm: Optional[str]) -> Any:
    """The production runner, but one that lets every turn wait: a simulated loop decides far faster than a real one
    (no agent turn runs between its decisions), so the shadow falls behind it; its queue drains at the end. The
    candidate runs in the shadow's own process, which sets up its own LM (the same `--lm`) when it calls one."""
    if candidate is None:
        return None
    import sys
    from functools import partial

    from guidebench.lm.factory import configure_lm
    from runtime.shadow import ShadowRunner

    setup = partial(configure_lm, lm or "local") if candidate.manifest.uses_lm else None
    return ShadowRunner(candidate, folder, deadline_s=deadline_s, max_pending=sys.maxsize, setup=setup)
