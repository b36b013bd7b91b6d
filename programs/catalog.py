"""The built-in programs, registered under their stable names.

Each is registered by its import path, imported when a program is first built: listing the
programs (`guidebench programs`) imports no program module and no DSPy.
"""

from __future__ import annotations

from .registry import register

register("full_auto.predict", "programs.full_auto:FullAutoPredict", kind="full_auto", uses_lm=True,
         description="The original: dspy.Predict over FullAutoDecisionSignature, three seed demos until compiled.")
register("full_auto.predict_clear", "programs.full_auto:FullAutoPredictClear", kind="full_auto", uses_lm=True,
         description="full_auto.predict with a clearer instruction, field descriptions and the action as a choice.")
register("full_auto.zeroshot", "programs.full_auto:FullAutoZeroShot", kind="full_auto", uses_lm=True,
         description="full_auto.predict without any demo, to measure the zero-shot baseline.")
register("full_auto.cot", "programs.full_auto:FullAutoChainOfThought", kind="full_auto", uses_lm=True,
         description="Chain of thought over FullAutoDecisionSignature, seed demos with reasoning.")
register("full_auto.compact", "programs.full_auto:FullAutoCompact", kind="full_auto", uses_lm=True,
         description="full_auto.predict's decision from a compact rendering (no ids, counts, one line per fact) "
                     "with a short answer.")
register("full_auto.compact_state", "programs.full_auto:FullAutoCompactState", kind="full_auto", uses_lm=True,
         description="full_auto.compact plus the turn counters and the agent's last message (clipped), which "
                     "neither signature sees.")
register("full_auto.compact_cot", "programs.full_auto:FullAutoCompactChainOfThought", kind="full_auto", uses_lm=True,
         description="Chain of thought over the compact signature: one short sentence of reasoning, then the "
                     "compact answer.")
register("full_auto.hybrid", "programs.hybrid:FullAutoHybrid", kind="full_auto", uses_lm=True,
         description="Rules decide the unambiguous turns (failed, interrupted, pending input, done; the set is "
                     "a parameter), full_auto.compact_state the rest.")
register("full_auto.learned", "programs.learned:FullAutoLearned", kind="full_auto", uses_lm=False, trained=True,
         description="A linear decision model fit on the logs (the fit recipe): the action of least expected cost, "
                     "no LM call.")
register("full_auto.cascade", "programs.learned:FullAutoCascade", kind="full_auto", uses_lm=True, trained=True,
         description="full_auto.learned answers when its probability reaches the threshold, an LM program "
                     "(full_auto.compact_state by default) the rest.")
register("full_auto.stack", "programs.stack:FullAutoStack", kind="full_auto", uses_lm=True,
         description="Module stack: summarize the turn -> select the action -> verify it (3 LM calls).")
register("full_auto.rules", "programs.rules_full_auto:FullAutoRules", kind="full_auto", uses_lm=False, aliases=("rule",),
         description="Reference policy, no LM: stop on failure, pause on pending input, continue while "
                     "progressing, stop when done.")
register("full_auto.always_continue", "programs.rules_full_auto:AlwaysContinue", kind="full_auto", uses_lm=False,
         description="Baseline policy, no LM: always continue with the fallback prompt.")
register("planner.predict", "programs.planner:PlannerPredict", kind="planner", uses_lm=True,
         description="dspy.Predict over OptimizationDirectiveSignature, two seed demos until compiled.")
register("planner.cot", "programs.planner:PlannerChainOfThought", kind="planner", uses_lm=True,
         description="Chain of thought over OptimizationDirectiveSignature.")
register("planner.compact", "programs.planner:PlannerCompact", kind="planner", uses_lm=True,
         description="planner.predict's directive from only the packet facts it acts on, with short lists.")
register("planner.hybrid", "programs.planner_hybrid:PlannerHybrid", kind="planner", uses_lm=True,
         description="The pivot rules choose the family (pivot compliance 1.0 by construction), one short LM call "
                     "writes hypothesis, modifiers, risk, effect, changes and validation.")
register("planner.rules", "programs.rules_planner:PlannerRules", kind="planner", uses_lm=False,
         description="Reference planner, no LM: follows the pivot policy (least-tried allowed family, lower "
                     "the bound when near it).")
register("planner.learned", "programs.planner_learned:PlannerLearned", kind="planner", uses_lm=False, trained=True,
         description="An outcome model fit on the logs (the fit recipe) picks the family of highest expected "
                     "improvement the loop runner allows (choose_among = compliant: the pivot protocol's); the rest "
                     "as planner.rules, no LM call.")
register("planner.logged", "programs.planner_logged:PlannerLogged", kind="planner", uses_lm=False,
         description="The deployed planner's directives as logged (family from strategy_tags[0]); the planner "
                     "board's default champion.")
register("logged", "programs.logged:LoggedDecisionProgram", kind="full_auto", uses_lm=False,
         description="the deployed policy's decisions as logged (model's own action and confidence from the audit)")
