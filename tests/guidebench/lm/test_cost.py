"""guidebench.lm.cost: the one line an LM-calling command prints first, with the LM and what its records cost."""

from __future__ import annotations

import dspy
import pytest

import programs
from evals.replay import replay
from evals.usage import track_calls
from guidebench.lm.cost import LOCAL_SPEED, Scoring, Totals, announce, cost_line, replay_cost
from guidebench.lm.factory import make_lm
from optimizer_support import decision_examples, decision_records
from optimizers.knn_fewshot import NearestDemos


def test_the_line_names_the_lm_and_bounds_the_calls_a_replay_makes(capsys):
    records = decision_records(10)
    program = programs.get("full_auto.predict")
    line = announce("fake", [Scoring("full_auto.predict", program, records, "full_auto"),
                             Scoring("full_auto.rules", programs.get("full_auto.rules"), records, "full_auto")])
    assert capsys.readouterr().out == line + "\n" and "\n" not in line
    assert line.startswith("LM fake (deterministic, for tests: no model, no cost): at most 10 calls, ~")
    assert line.endswith("for 10 records of full_auto.predict"), "rule programs call no LM and are not counted"
    # What it promises: the replay makes at most that many calls.
    with dspy.context(lm=make_lm("fake", cache=False)), track_calls() as ledger:
        replay(program, records, progress=False)
    assert 0 < ledger.totals()["lm_calls"] <= 10


def test_a_programs_own_demos_and_a_knn_programs_k_make_its_prompt():
    records = decision_records(8)
    zeroshot, seeded = programs.get("full_auto.zeroshot"), programs.get("full_auto.predict")
    assert not zeroshot.predictors()[0].demos and len(seeded.predictors()[0].demos) == 3
    cost = {name: replay_cost(Scoring(name, program, records, "full_auto"), "fake").total_tokens
            for name, program in (("zeroshot", zeroshot), ("seeded", seeded))}
    knn = NearestDemos(programs.get("full_auto.zeroshot"), decision_examples(6), k=2)
    knn_tokens = [replay_cost(Scoring("knn", NearestDemos(programs.get("full_auto.zeroshot"), decision_examples(6),
                                                          k=k), records, "full_auto"), "fake").total_tokens
                  for k in (1, 2)]
    assert cost["zeroshot"] < cost["seeded"] and knn_tokens[0] < knn_tokens[1]
    assert replay_cost(Scoring("knn", knn, records, "full_auto"), "fake").lm_calls == 8


def test_the_embedded_model_evaluates_the_shared_prompt_prefix_once():
    records = decision_records(20)
    one = replay_cost(Scoring("p", programs.get("full_auto.predict"), records[:1], "full_auto"), "local")
    many = replay_cost(Scoring("p", programs.get("full_auto.predict"), records, "full_auto"), "local")
    assert many.total_tokens > 15 * one.total_tokens, "every call's prompt counts in tokens"
    assert many.minutes < 20 * one.minutes, "but the instructions and fixed demos are evaluated once"
    assert "shared prompt prefix evaluated once" in many.speed_text()
    remote = replay_cost(Scoring("p", programs.get("full_auto.predict"), records, "full_auto"), "openai/gpt-4o-mini")
    assert remote.minutes == pytest.approx(20 / 60) and "shared" not in remote.speed_text()


def test_totals_add_up_and_repeat():
    parts = [Totals(2, 100, 0.5, "1 s/call"), Totals(3, 50, 0.25, "1 s/call")]
    total = Totals.of(parts, times=4)
    assert (total.lm_calls, total.total_tokens, total.minutes) == (20, 600, 3.0)
    line = cost_line("local", [total], "4 trials")
    assert line == ("LM local (the embedded Gemma 3 270M, in-process): at most 20 calls, ~600 tokens, ~3.0 min "
                    "(2 idle cores: 1 s/call; cached calls are free) for 4 trials")
    assert LOCAL_SPEED["prompt_tokens_per_s"] > 0
    assert cost_line("fake", [], "2 records") == \
        "LM fake (deterministic, for tests: no model, no cost): no LM call expected for 2 records"
