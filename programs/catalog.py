"""The built-in programs, registered under their stable names."""

from __future__ import annotations

from .full_auto import FullAutoChainOfThought, FullAutoCompact, FullAutoPredict, FullAutoPredictClear
from .planner import PlannerChainOfThought, PlannerCompact, PlannerPredict
from .registry import register
from .rules_full_auto import AlwaysContinue, FullAutoRules
from .rules_planner import PlannerRules
from .stack import FullAutoStack

register("full_auto.predict", FullAutoPredict, kind="full_auto", uses_lm=True,
         description="The original: dspy.Predict over FullAutoDecisionSignature, three seed demos until compiled.")
register("full_auto.predict_clear", FullAutoPredictClear, kind="full_auto", uses_lm=True,
         description="full_auto.predict with a clearer instruction, field descriptions and the action as a choice.")
register("full_auto.zeroshot", lambda: FullAutoPredict(demos=[]), kind="full_auto", uses_lm=True,
         description="full_auto.predict without any demo, to measure the zero-shot baseline.")
register("full_auto.cot", FullAutoChainOfThought, kind="full_auto", uses_lm=True,
         description="Chain of thought over FullAutoDecisionSignature, seed demos with reasoning.")
register("full_auto.compact", FullAutoCompact, kind="full_auto", uses_lm=True,
         description="full_auto.predict's decision from a compact rendering (no ids, counts, one line per fact) "
                     "with a short answer.")
register("full_auto.stack", FullAutoStack, kind="full_auto", uses_lm=True,
         description="Module stack: summarize the turn -> select the action -> verify it (3 LM calls).")
register("full_auto.rules", FullAutoRules, kind="full_auto", uses_lm=False, aliases=("rule",),
         description="Reference policy, no LM: stop on failure, pause on pending input, continue while "
                     "progressing, stop when done.")
register("full_auto.always_continue", AlwaysContinue, kind="full_auto", uses_lm=False,
         description="Baseline policy, no LM: always continue with the fallback prompt.")
register("planner.predict", PlannerPredict, kind="planner", uses_lm=True,
         description="dspy.Predict over OptimizationDirectiveSignature, two seed demos until compiled.")
register("planner.cot", PlannerChainOfThought, kind="planner", uses_lm=True,
         description="Chain of thought over OptimizationDirectiveSignature.")
register("planner.compact", PlannerCompact, kind="planner", uses_lm=True,
         description="planner.predict's directive from only the packet facts it acts on, with short lists.")
register("planner.rules", PlannerRules, kind="planner", uses_lm=False,
         description="Reference planner, no LM: follows the pivot policy (least-tried allowed family, lower "
                     "the bound when near it).")
