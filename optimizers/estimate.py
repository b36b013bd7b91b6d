"""Dry-run cost estimates: LM calls and tokens of a compile, from settings and measured prompt sizes.

Prompt sizes are measured, not guessed: the program's own predictors format real training
examples with the configured DSPy adapter (no LM call), with zero and one demonstration, and the
difference is the cost of one demo. Each recipe turns its settings into stages (`Stage`: how many
calls, with how many demos in the prompt); `CostEstimate` multiplies them out. Counts are upper
bounds where an optimizer may stop early (bootstrapping stops once it has enough demos).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

import dspy

# Characters per token when no tokenizer is at hand: the embedded Gemma 3 tokenizer gives 2.6 on the
# sample Full Auto prompts (JSON summaries, diffs) and 3.5 on the planner prompts.
CHARS_PER_TOKEN = 3.0
MAX_SAMPLE = 12


def approx_tokens(text: str) -> int:
    """Token count of text from the measured characters-per-token ratio."""
    return int(math.ceil(len(text) / CHARS_PER_TOKEN)) if text else 0


@dataclass(frozen=True)
class PromptSizes:
    """Measured sizes, in tokens, averaged over sample examples and the program's predictors."""

    base_prompt_tokens: float  # instructions, field descriptions and one input, no demo
    demo_tokens: float  # one demonstration (its input and its output)
    output_tokens: float  # one answer
    predictors: int
    sample: int

    def prompt(self, demos: float) -> float:
        """Prompt tokens of one call with `demos` demonstrations."""
        return self.base_prompt_tokens + demos * self.demo_tokens


@dataclass(frozen=True)
class Stage:
    """LM calls of one stage of a compile.

    `demos` is the number of demos in each prompt; `prompt_scale` multiplies the base prompt for
    calls whose prompt is not the task prompt (instruction proposals, reflections), `output_scale`
    the answer length.
    """

    name: str
    calls: int
    demos: float = 0.0
    prompt_scale: float = 1.0
    output_scale: float = 1.0
    note: str = ""


@dataclass
class StageCost:
    """A stage with its tokens."""

    name: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    note: str = ""


@dataclass
class CostEstimate:
    """Estimated LM work of a compile."""

    recipe: str
    stages: list[StageCost]
    sizes: PromptSizes
    seconds_per_call: float  # fixed cost of a call
    notes: list[str] = field(default_factory=list)
    # Throughput of the LM, when known: each call also costs its tokens at these rates (0: ignored).
    prompt_tokens_per_s: float = 0.0
    completion_tokens_per_s: float = 0.0

    @classmethod
    def from_stages(cls, recipe: str, stages: Sequence[Stage], sizes: PromptSizes, *,
                    seconds_per_call: float, prompt_tokens_per_s: float = 0.0,
                    completion_tokens_per_s: float = 0.0) -> "CostEstimate":
        """Multiply stages out with measured prompt sizes."""
        costs = []
        for stage in stages:
            prompt = stage.calls * sizes.prompt(stage.demos) * stage.prompt_scale
            completion = stage.calls * sizes.output_tokens * stage.output_scale
            costs.append(StageCost(stage.name, int(stage.calls), int(round(prompt)), int(round(completion)), stage.note))
        return cls(recipe, costs, sizes, seconds_per_call, prompt_tokens_per_s=prompt_tokens_per_s,
                   completion_tokens_per_s=completion_tokens_per_s)

    @property
    def lm_calls(self) -> int:
        """Total calls."""
        return sum(s.calls for s in self.stages)

    @property
    def prompt_tokens(self) -> int:
        """Total prompt tokens."""
        return sum(s.prompt_tokens for s in self.stages)

    @property
    def completion_tokens(self) -> int:
        """Total completion tokens."""
        return sum(s.completion_tokens for s in self.stages)

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def minutes(self) -> float:
        """Wall time: a fixed cost per call plus its tokens at the LM's throughput (when known)."""
        seconds = self.lm_calls * self.seconds_per_call
        if self.prompt_tokens_per_s > 0:
            seconds += self.prompt_tokens / self.prompt_tokens_per_s
        if self.completion_tokens_per_s > 0:
            seconds += self.completion_tokens / self.completion_tokens_per_s
        return seconds / 60.0

    def speed_text(self) -> str:
        """How the minutes were estimated."""
        text = f"{self.seconds_per_call:g} s/call"
        if self.prompt_tokens_per_s > 0:
            text += f" + prompt at {self.prompt_tokens_per_s:g} tok/s"
        if self.completion_tokens_per_s > 0:
            text += f" + answer at {self.completion_tokens_per_s:g} tok/s"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready estimate."""
        return {"recipe": self.recipe, "lm_calls": self.lm_calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens,
                "minutes": round(self.minutes, 1), "seconds_per_call": self.seconds_per_call,
                "prompt_tokens_per_s": self.prompt_tokens_per_s, "completion_tokens_per_s": self.completion_tokens_per_s,
                "stages": [asdict(s) for s in self.stages], "prompt_sizes": asdict(self.sizes),
                "notes": list(self.notes)}

    def render(self) -> str:
        """A plain-text table for the terminal."""
        rows = [("stage", "LM calls", "prompt tok", "completion tok", "note")]
        rows += [(s.name, str(s.calls), str(s.prompt_tokens), str(s.completion_tokens), s.note) for s in self.stages]
        rows.append(("total", str(self.lm_calls), str(self.prompt_tokens), str(self.completion_tokens),
                     f"~{self.minutes:.1f} min ({self.speed_text()}, an idle machine)"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(4)) + "  " + r[4]
                 for r in rows]
        lines.insert(1, "-" * (sum(widths) + 8))
        sizes = self.sizes
        lines.append(f"measured prompt: {sizes.base_prompt_tokens:.0f} tok base + {sizes.demo_tokens:.0f} tok per demo, "
                     f"answer ~{sizes.output_tokens:.0f} tok ({sizes.sample} examples x {sizes.predictors} predictor(s))")
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(line.rstrip() for line in lines)


def measure_prompts(program: dspy.Module, examples: Sequence[dspy.Example], *,
                    count_tokens: Optional[Callable[[str], int]] = None,
                    adapter: Optional[dspy.Adapter] = None) -> PromptSizes:
    """Format real examples through the program's predictors (no LM call) and measure prompt sizes."""
    count = count_tokens or approx_tokens
    adapter = adapter or dspy.settings.adapter or dspy.ChatAdapter()
    predictors = program.predictors()
    sample = list(examples)[:MAX_SAMPLE]
    if not predictors or not sample:
        return PromptSizes(0.0, 0.0, 0.0, len(predictors), len(sample))
    base, per_demo, output = [], [], []
    for predictor in predictors:
        signature = predictor.signature
        for i, example in enumerate(sample):
            inputs = {name: example.get(name, "") for name in signature.input_fields}
            demo = sample[(i + 1) % len(sample)]
            demo_dict = {name: demo.get(name, "") for name in (*signature.input_fields, *signature.output_fields)}
            zero = _tokens(adapter.format(signature, [], inputs), count)
            one = _tokens(adapter.format(signature, [demo_dict], inputs), count)
            outputs = {name: example.get(name, "") for name in signature.output_fields}
            base.append(zero)
            per_demo.append(max(0, one - zero))
            output.append(count(adapter.format_assistant_message_content(signature, outputs)))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return PromptSizes(mean(base), mean(per_demo), mean(output), len(predictors), len(sample))


def _tokens(messages: list[dict[str, Any]], count: Callable[[str], int]) -> int:
    return sum(count(_text(m.get("content", ""))) for m in messages)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)
