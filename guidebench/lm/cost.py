"""What an LM-calling command says before its LM work: which LM it uses and what its records will cost.

Every command that calls an LM (eval, compile, search, baselines, leaderboard, promote, demo) prints one
line up front, e.g.

    LM local (the embedded Gemma 3 270M, in-process): at most 221 calls, ~620,291 tokens, ~12.4 min (2 idle
    cores: 0.3 s/call + prompt at 600 tok/s + answer at 40 tok/s, the shared prompt prefix evaluated once;
    cached calls are free) for 221 records of full_auto.predict

The numbers come from the compile dry run's machinery (`optimizers.estimate`): each program's prompt is
measured by formatting real records through its own predictors, with its own demos (no LM call; the
embedded model's own tokenizer counts the tokens), one call per predictor per record (an upper bound: a
rule gate decides some turns without a call, and DSPy's cache answers a repeated call for free), at the
LM's measured speed. On the sample's 221 test records that gives 12.4 min for `full_auto.predict`
(measured: 14), 30 for its `knn_fewshot` compile (25) and 7 for `full_auto.compact` (4.4; reports/bench.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, Sequence

# Speed of the embedded model on an idle 2-core machine: about 360 prompt and 40 answer tokens in 1-2 s
# (design.md), i.e. a small fixed cost, ~600 prompt tok/s, ~40 answer tok/s. A loaded machine is slower:
# with 12 busy processes on 2 cores a 2,400-token call took ~100 s.
LOCAL_SPEED = {"seconds_per_call": 0.3, "prompt_tokens_per_s": 600.0, "completion_tokens_per_s": 40.0}
# A hosted or served model: its throughput is unknown here, a second per call is the usual order.
REMOTE_SPEED = {"seconds_per_call": 1.0}
FAKE_SPEED = {"seconds_per_call": 0.0}


def lm_speed(spec: str) -> dict[str, float]:
    """The speed the estimates assume for an LM spec."""
    from guidebench.lm.factory import FAKE_SPECS, LOCAL_SPECS

    return LOCAL_SPEED if spec in LOCAL_SPECS else FAKE_SPEED if spec in FAKE_SPECS else REMOTE_SPEED


def describe_lm(spec: str) -> str:
    """The LM spec with what it is: `local (the embedded Gemma 3 270M, in-process)`."""
    from guidebench.lm.factory import FAKE_SPECS, LOCAL_SPECS

    if spec in LOCAL_SPECS:
        return f"{spec} (the embedded Gemma 3 270M, in-process)"
    if spec in FAKE_SPECS:
        return f"{spec} (deterministic, for tests: no model, no cost)"
    return f"{spec} (LiteLLM)"


def token_counter(spec: str) -> Optional[Callable[[str], int]]:
    """The embedded model's own tokenizer (vocabulary only, no weights) for a local LM; None otherwise."""
    from guidebench.lm.factory import LOCAL_SPECS

    if spec not in LOCAL_SPECS:
        return None
    try:
        from guidebench.lm.engine import ensure_model, load_vocab

        vocab = load_vocab(ensure_model())  # closed at exit with the models, never left to the collector
    except Exception:  # no model file or no llama-cpp: the characters-per-token estimate will do
        return None
    return lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))


@dataclass
class Scoring:
    """One program replayed on records: what an estimate is made of."""

    label: str
    program: Any  # a dspy.Module
    records: Sequence[Any]  # DecisionRecord | PlannerRecord
    kind: str  # full_auto | planner


@dataclass
class Totals:
    """Estimates added up (and repeated `times`): what `cost_line` prints, like a `CostEstimate`."""

    lm_calls: int
    total_tokens: int
    minutes: float
    speed: str

    @classmethod
    def of(cls, estimates: Sequence[Any], times: int = 1) -> "Totals":
        """The sum of `CostEstimate`s (or `Totals`), `times` over."""
        return cls(lm_calls=times * sum(e.lm_calls for e in estimates),
                   total_tokens=times * sum(e.total_tokens for e in estimates),
                   minutes=times * sum(e.minutes for e in estimates),
                   speed=estimates[0].speed_text() if estimates else "")

    def speed_text(self) -> str:
        """How the minutes were estimated."""
        return self.speed


def _examples(records: Sequence[Any], kind: str) -> list[Any]:
    """Examples to measure prompts with: labeled ones carry an answer to measure, the others their inputs."""
    import programs

    to_example = programs.decision_example if kind == "full_auto" else programs.planner_example
    to_inputs = programs.decision_inputs if kind == "full_auto" else programs.planner_inputs
    examples = []
    for record in records[:12]:
        try:
            examples.append(to_example(record))
        except ValueError:  # no outcome label: the prompt is measured, the answer counts as empty
            examples.append(to_inputs(record))
    return examples


def nearest_k(program: Any) -> Optional[int]:
    """The demos a program picks per input (`knn_fewshot`: the workbench's wrapper or an export's selector), else None."""
    k = getattr(program, "k", None) or getattr(getattr(program, "selector", None), "k", None)
    return k if isinstance(k, int) else None


def prompt_parts(program: Any, examples: Sequence[Any], count: Callable[[str], int],
                 per_input_demos: bool) -> tuple[float, float]:
    """(tokens the predictors' own demos add to a call, tokens of the prompt before the input), means over the
    predictors and examples. The part before the input is what the embedded engine reuses from its prefix cache:
    instructions and fixed demos; only the instructions when the demos change per input."""
    import dspy

    from optimizers.estimate import _tokens

    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    added, constant = [], []
    for predictor in program.predictors():
        signature = predictor.signature
        demos = [] if per_input_demos else list(predictor.demos)
        for example in examples:
            inputs = {name: example.get(name, "") for name in signature.input_fields}
            messages = adapter.format(signature, demos, inputs)
            added.append(_tokens(messages, count) - _tokens(adapter.format(signature, [], inputs), count))
            constant.append(_tokens(messages[:1] if per_input_demos else messages[:-1], count))
    mean = lambda values: sum(values) / len(values) if values else 0.0  # noqa: E731
    return mean(added), mean(constant)


def replay_cost(scoring: Scoring, lm_spec: str, counter: Optional[Callable[[str], int]] = None) -> "Totals":
    """The estimated calls, tokens and minutes of replaying one program on its records.

    A program that picks k demos per input is costed at k demos of the measured size; any other at the
    prompt its own demos make (the hand-written seed demos are much shorter than a logged turn). On the
    embedded model a call evaluates only the prompt after the part the previous call shared (its prefix
    cache), so the minutes count that part once.
    """
    from optimizers.estimate import CostEstimate, Stage, approx_tokens, measure_prompts

    program = scoring.program
    examples = _examples(list(scoring.records), scoring.kind)
    sizes = measure_prompts(program, examples, count_tokens=counter)
    k = nearest_k(program)
    fixed, shared = prompt_parts(program, examples[:3], counter or approx_tokens, per_input_demos=k is not None)
    if k is None:
        sizes, k = replace(sizes, base_prompt_tokens=sizes.base_prompt_tokens + fixed), 0
    calls = len(scoring.records) * len(program.predictors())
    speed = lm_speed(lm_spec)
    estimate = Totals.of([CostEstimate.from_stages(scoring.label, [Stage(scoring.label, calls, demos=k)], sizes,
                                                   **speed)])
    if speed is LOCAL_SPEED and calls > 1:
        estimate.minutes -= (calls - 1) * shared / speed["prompt_tokens_per_s"] / 60
        estimate.speed += ", the shared prompt prefix evaluated once"
    return estimate


def cost_line(lm_spec: str, estimates: Sequence[Any], what: str) -> str:
    """One line: the LM, and the calls, tokens and minutes of `estimates` (`CostEstimate`s) for `what`."""
    if not estimates:
        return f"LM {describe_lm(lm_spec)}: no LM call expected for {what}"
    total = Totals.of(estimates)
    calls, tokens, minutes = total.lm_calls, total.total_tokens, total.minutes
    if not calls:  # a trained program fit and scored without its LM, against a rule baseline
        return f"LM {describe_lm(lm_spec)}: no LM call expected for {what}"
    where = "2 idle cores: " if lm_speed(lm_spec) is LOCAL_SPEED else ""
    return (f"LM {describe_lm(lm_spec)}: at most {calls:,} calls, ~{tokens:,} tokens, ~{minutes:.1f} min "
            f"({where}{estimates[0].speed_text()}; cached calls are free) for {what}")


def announce(lm_spec: str, scorings: Sequence[Scoring], what: Optional[str] = None) -> str:
    """Print (and return) the line for replaying these programs on their records (LM programs only)."""
    counter = token_counter(lm_spec)
    lm_scorings = [s for s in scorings if s.program.predictors()]
    estimates = [replay_cost(s, lm_spec, counter) for s in lm_scorings]
    line = cost_line(lm_spec, estimates, what or records_text(lm_scorings))
    print(line, flush=True)
    return line


def records_text(scorings: Sequence[Scoring]) -> str:
    """`221 records of full_auto.predict` / `221 records each of a, b`."""
    counts = {len(s.records) for s in scorings}
    names = ", ".join(s.label for s in scorings)
    if len(counts) == 1:
        return f"{counts.pop()} records{' each' if len(scorings) > 1 else ''} of {names}"
    return "; ".join(f"{len(s.records)} records of {s.label}" for s in scorings)
