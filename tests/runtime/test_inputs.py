"""Training and production render the same inputs: a compiled program loaded by the runtime sends the
model the very prompt its training program sends (same input text, same demos), planner and Full Auto,
the compact programs included; the compact rendering states each fact of a record in one short line."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM

import programs
from frozen_support import summary
from guidebench.release.export import ExportSource, export_frozen
from programs.seeds import _planner_seed_packets, decision_demos, planner_demos
from runtime import (
    AdvisorPacket,
    DecisionRecord,
    FullAutoTurnSummary,
    GuardrailConfig,
    LoggedDecision,
    OutcomeLabel,
    PlannerRecord,
    load_frozen,
)
from runtime.advisor import ExperimentLogEntry, FamilyConstraints, PerformanceProfile
from runtime.inputs import (COMPACT_PACKET_NAMES, COMPACT_STATE_NAMES, COMPACT_SUMMARY_NAMES, MESSAGE_CLIP,
                            PACKET_INPUT_NAMES, SUMMARY_INPUT_NAMES, compact_decision_inputs, compact_packet_inputs,
                            compact_planner_inputs, compact_state_inputs, compact_summary_inputs, message_line,
                            packet_inputs, summary_inputs)
from signatures import FULL_AUTO_INPUT_FIELDS, PLANNER_INPUT_FIELDS

DIRECTIVE = {"objective": "Beat 1500", "primary_hypothesis": "fewer loads", "strategy_family": "family:reduce_loads",
             "strategy_modifiers": '["vector"]', "risk": "Low", "expected_effect_cycles": "-20",
             "change_summary": '["merge loads"]', "step_plan": '["a", "b", "c"]',
             "validation": '{"commands": ["python tests/submission_tests.py"], "pass_criteria": ["passes"]}',
             "next_packet_requests": "[]", "did_web_search": "false"}
DECISION = {"action": "continue", "next_input": "Run the tests next.", "reason": "plan has open steps",
            "confidence": "0.8"}


def entry(iteration: int, family: str, valid: bool, cycles: int | None, best_before: int) -> dict:
    return {"iteration_id": iteration, "timestamp_utc": "2025-01-01T00:00:00Z", "branch": f"b{iteration}",
            "base_branch": "main", "base_sha": "a" * 7, "head_sha": "b" * 7, "files_changed": ["kernel.py"],
            "tests_diff_empty": True, "valid": valid, "cycles": cycles,
            "delta_vs_best": None if cycles is None else cycles - best_before,
            "strategy_tags": [family, "unroll"], "hypothesis": f"attempt {iteration}: überlappende Loads",
            "change_summary": ["edit kernel"], "result_summary": "measured", "best_before": best_before}


def rich_packet() -> AdvisorPacket:
    """A packet using every part the rendering touches: raw JSONL and dict lines, garbage, a profile, a block."""
    return AdvisorPacket(
        goal="threshold", threshold_target=1487, best_cycles=1500, plateau_valid_iters_since_best=3,
        strategy_family_constraints=FamilyConstraints(
            blocked_families=["family:schedule"], current_family="family:schedule", current_family_streak_len=2),
        experiment_log_tail=[json.dumps(entry(1, "family:schedule", True, 1520, 1600)), "not json at all",
                             entry(2, "family:schedule", False, None, 1520),
                             entry(3, "family:schedule", True, 1500, 1520)],
        experiment_summary={"best_cycles": 1500, "best_cycles_by_family": {"family:schedule": 1500},
                            "invalid_counts": {"family:schedule": 1}, "recent_attempts": [{"x": 1}]},
        performance_profile=PerformanceProfile(min_cycles_by_engine={"load": 1200}, tight_lb_cycles=1210,
                                               schedule_cycles_estimate=1490, schedule_slack_pct=0.231),
    )


def prompt_of(lm: DummyLM) -> list[dict]:
    assert lm.history, "the LM was never called"
    return lm.history[-1]["messages"]


def _export(program: dspy.Module, entry_name: str, kind: str, out: Path) -> Path:
    source = ExportSource(entry=entry_name, kind=kind, uses_lm=True, program=program,
                          installed=programs.get(entry_name))
    return export_frozen(source, name="parity", version="0.1.0", out=out).path


# ----- the shared rendering ------------------------------------------------------------------------

def test_runtime_renders_exactly_the_signature_inputs_programs_train_on():
    assert PACKET_INPUT_NAMES == (*PLANNER_INPUT_FIELDS, *programs.inputs.PLANNER_EXTRA_FIELDS)
    packet = rich_packet()
    assert programs.planner_inputs(packet) == packet_inputs(packet)
    assert programs.planner_inputs(packet.model_dump(mode="json")) == packet_inputs(packet)
    assert all(isinstance(value, str) for value in packet_inputs(packet).values())
    turn = summary(turn_count=3, no_progress_count=1, recent_actions='["continue"]')
    rendered = summary_inputs(turn)
    trained = programs.decision_inputs(turn)
    assert set(FULL_AUTO_INPUT_FIELDS) <= set(trained) and set(trained) == set(rendered)
    assert {name: rendered[name] for name in trained} == trained
    assert trained["turn_count"] == "3"


# ----- planner --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def planner_pair(tmp_path_factory) -> tuple[dspy.Module, Path]:
    """A planner with labeled demos (one from a record with a rich packet) and its export."""
    seed_packet, _ = _planner_seed_packets()[0]
    outcome = ExperimentLogEntry.model_validate(entry(4, "family:break_deps", True, 1780, 1802))
    labeled = programs.planner_example(PlannerRecord(record_id="r4", episode_id="e1", iteration_id=4,
                                                     packet=rich_packet(), outcome=outcome))
    labeled_too = programs.planner_example(PlannerRecord(record_id="r5", episode_id="e1", iteration_id=5,
                                                         packet=seed_packet, outcome=outcome))
    trained = programs.get("planner.predict")
    trained.plan.demos = [labeled, labeled_too, *planner_demos()]
    folder = _export(trained, "planner.predict", "planner", tmp_path_factory.mktemp("parity") / "planner")
    return trained, folder


def _packets() -> list[AdvisorPacket]:
    packet = rich_packet()
    return [packet, AdvisorPacket(), packet.model_copy(update={"goal": "best", "performance_profile": None,
                                                                "experiment_log_tail": []})]


@pytest.mark.parametrize("index", range(3))
def test_standalone_planner_sends_the_training_prompt(planner_pair, index: int):
    trained, folder = planner_pair
    packet = _packets()[index]
    train_lm = DummyLM([DIRECTIVE] * 2)
    with dspy.context(lm=train_lm):
        trained(**programs.planner_inputs(packet))
    module = load_frozen(folder)
    assert type(module.program).__name__ == "FrozenPlannerProgram"
    run_lm = DummyLM([DIRECTIVE] * 2)
    with dspy.context(lm=run_lm):
        result = module(packet)
    assert prompt_of(run_lm) == prompt_of(train_lm)
    text = json.dumps(prompt_of(run_lm), ensure_ascii=False)
    assert text.count("[[ ## objective ## ]]") >= 5  # the four demos and the instructions
    assert '"packet"' not in text and "best_cycles_by_family" in text
    if index == 0:
        assert "#1 family:schedule+unroll valid cycles=1520 delta=-80" in text and "not json at all" in text
        assert not result.used_default and result.directive.strategy_family == "family:reduce_loads"


def test_installed_planner_without_an_input_mapping_sends_the_training_prompt(planner_pair):
    trained, folder = planner_pair
    packet = rich_packet()
    train_lm = DummyLM([DIRECTIVE] * 2)
    with dspy.context(lm=train_lm):
        trained(**programs.planner_inputs(packet))
    module = load_frozen(folder, program=programs.spec("planner.predict").factory)
    run_lm = DummyLM([DIRECTIVE] * 2)
    with dspy.context(lm=run_lm):
        result = module(packet)
    assert prompt_of(run_lm) == prompt_of(train_lm) and not result.used_default


# ----- Full Auto ------------------------------------------------------------------------------------

def _decision_record(turn: FullAutoTurnSummary, action: str, index: int) -> DecisionRecord:
    return DecisionRecord.build(
        turn, GuardrailConfig(), run_id="fullauto-1", sequence_id=index,
        logged=LoggedDecision(action=action, confidence=0.7, model_action=action, model_confidence=0.7,
                              reason="logged", state="running" if action == "continue" else "paused"),
        label=OutcomeLabel(action=action, source="human", reason="labeled"))


def test_standalone_full_auto_sends_the_training_prompt(tmp_path: Path):
    labeled = [programs.decision_example(_decision_record(
        summary(turn_id=f"turn-{i}", turn_count=i, recent_actions='[{"action": "continue"}]',
                token_usage=json.dumps({"totalTokens": 1000 + i})), action, i))
        for i, action in enumerate(("continue", "stop"))]
    trained = programs.get("full_auto.predict")
    trained.decide.demos = [*labeled, *decision_demos()]
    folder = _export(trained, "full_auto.predict", "full_auto", tmp_path / "fullauto")
    turn = summary(turn_count=4, no_progress_count=2, pending_approvals="1", recent_actions='["continue"]')
    train_lm = DummyLM([DECISION] * 2)
    with dspy.context(lm=train_lm):
        trained(**programs.decision_inputs(turn))
    for module in (load_frozen(folder), load_frozen(folder, program=programs.spec("full_auto.predict").factory)):
        run_lm = DummyLM([DECISION] * 2)
        with dspy.context(lm=run_lm):
            decision, _, _ = module(turn, GuardrailConfig())
        assert prompt_of(run_lm) == prompt_of(train_lm)
        assert decision.action == "continue"


# ----- the compact rendering (full_auto.compact, planner.compact) -----------------------------------

REPO = Path(__file__).resolve().parents[2]


def _sample_summary() -> FullAutoTurnSummary:
    """The first committed sample decision whose summary exercises every compact field (real writer's shapes:
    the plan and diff snapshots are the app server's params, token usage nests its total)."""
    for line in (REPO / "datasets" / "sample" / "fullauto" / "fullauto-decisions.jsonl").read_text().splitlines():
        fields = json.loads(line)["summary"]
        if (fields["compaction_events"] != "0" and fields["recent_actions"] != "[]" and fields["turn_plan"]
                and fields["diff_summary"].count("+++ ") >= 2):
            return FullAutoTurnSummary.model_validate(fields, strict=False)
    raise AssertionError("the sample log has no such decision")


def test_compact_rendering_of_a_sample_record_states_its_fields_in_one_line_each():
    turn = _sample_summary()
    steps = json.loads(turn.turn_plan)["plan"]
    done = [step for step in steps if step["status"] == "completed"]
    current = next(step for step in steps if step["status"] == "inProgress")["step"]
    diff = json.loads(turn.diff_summary)["diff"].splitlines()
    names = [line[len("+++ b/"):].rsplit("/", 1)[-1] for line in diff if line.startswith("+++ ")]
    added = sum(line.startswith("+") and not line.startswith("+++ ") for line in diff)
    removed = sum(line.startswith("-") and not line.startswith("--- ") for line in diff)
    more = f" +{len(names) - 3} more" if len(names) > 3 else ""
    actions = [item["action"] for item in json.loads(turn.recent_actions)][-5:]
    expected = {
        "status": turn.last_turn_status,
        "plan": f"{len(done)}/{len(steps)} done; current: {current}",
        "diff": f"+{added} -{removed} in {len(names)} files: {', '.join(names[:3])}{more}",
        "tokens": str(json.loads(turn.token_usage)["tokenUsage"]["total"]["totalTokens"]),
        "approvals": turn.pending_approvals,
        "tool_inputs": turn.pending_tool_inputs,
        "recent": ", ".join(actions),
        "compactions": turn.compaction_events,
    }
    assert compact_summary_inputs(turn) == expected
    rendered = summary_inputs(turn)
    assert {name: rendered[name] for name in COMPACT_SUMMARY_NAMES} == expected
    assert turn.thread_id not in "".join(expected.values()) and turn.turn_id not in "".join(expected.values())
    # From the original fields alone (e.g. inputs built by hand), the compact fields come out the same.
    original = {name: value for name, value in rendered.items() if name not in COMPACT_SUMMARY_NAMES}
    assert compact_decision_inputs(original) == expected


@pytest.mark.parametrize("fields, expected", [
    ({"last_turn_status": "failed", "turn_error": "  sandbox\ncrashed  "}, {"status": "failed: sandbox crashed"}),
    ({"turn_plan": "- [x] write code\n- [ ] add tests"}, {"plan": "1/2 done; current: add tests"}),
    ({"turn_plan": json.dumps([{"step": "a", "status": "completed"}])}, {"plan": "1/1 done"}),
    ({"turn_plan": "", "diff_summary": "", "token_usage": "", "recent_actions": "[]"},
     {"plan": "none", "diff": "none", "tokens": "unknown", "recent": "none"}),
    ({"diff_summary": "--- a/x.py\n+++ b/x.py\n@@ -1 +1,2 @@\n-a\n+b\n+c"}, {"diff": "+2 -1 in 1 file: x.py"}),
    ({"pending_tool_inputs": json.dumps([{"name": "choose a branch"}, {"name": "a token"}, {"name": "a path"}])},
     {"tool_inputs": "3 (choose a branch, a token +1 more)"}),
    ({"token_usage": json.dumps({"tokenUsage": {"total": {"totalTokens": 51234}}})}, {"tokens": "51234"}),
])
def test_compact_rendering_reads_every_shape(fields, expected):
    rendered = compact_summary_inputs(summary(**fields))
    assert {name: rendered[name] for name in expected} == expected


def test_compact_packet_rendering_keeps_only_what_the_planner_acts_on():
    packet = rich_packet()
    rendered = compact_packet_inputs(packet)
    assert set(rendered) == {"goal", *COMPACT_PACKET_NAMES}
    assert rendered["goal"] == packet_inputs(packet)["goal"]
    constraints = packet.strategy_family_constraints
    assert rendered["plateau"] == str(packet.plateau_valid_iters_since_best)
    assert rendered["families"] == (
        "allowed reduce_loads, break_deps; blocked schedule; "
        f"current schedule {constraints.current_family_streak_len}/{constraints.max_consecutive}")
    assert rendered["best"] == "1500; schedule 1500; invalid schedule 1"
    profile = packet.performance_profile
    assert rendered["bound"] == (f"tight {profile.tight_lb_cycles}, estimate {profile.schedule_cycles_estimate}, "
                                 f"slack {profile.schedule_slack_pct:.1%}")
    lines = rendered["attempts"].splitlines()
    assert lines == ["#1 schedule/unroll 1520 (-80)", "not json at all", "#2 schedule/unroll invalid",
                     "#3 schedule/unroll 1500 (-20)"]
    assert {name: packet_inputs(packet)[name] for name in rendered} == rendered
    assert compact_planner_inputs({"packet": packet.model_dump_json()}) == rendered


def test_compact_state_rendering_adds_the_turn_counters_and_the_clipped_last_message():
    long = "Started on the parser. " + "Read the grammar and tried a fix. " * 20 + "Now 2 tests still fail."
    turn = summary(turn_count=7, no_progress_count=2, last_agent_message=long)
    state = compact_state_inputs(turn)
    assert tuple(state) == COMPACT_STATE_NAMES
    assert (state["turn_count"], state["no_progress_count"]) == ("7", "2")
    # A long message keeps its start and its end (where a report concludes), within the clip.
    assert len(state["message"]) <= MESSAGE_CLIP and " ... " in state["message"]
    assert state["message"].startswith("Started on the parser.") and state["message"].endswith("2 tests still fail.")
    assert message_line("  short\n  note ") == "short note" and message_line("") == "none"
    rendered = summary_inputs(turn)
    assert set(rendered) == set(SUMMARY_INPUT_NAMES) and {name: rendered[name] for name in state} == state
    assert rendered["last_agent_message"] == long  # the original field keeps the whole message
    # From the original fields alone (inputs built by hand), the compact state fields come out the same.
    names = (*COMPACT_SUMMARY_NAMES, *COMPACT_STATE_NAMES)
    original = {name: value for name, value in rendered.items() if name not in (*COMPACT_SUMMARY_NAMES, "message")}
    assert compact_decision_inputs(original, names) == {name: rendered[name] for name in names}
    assert compact_decision_inputs(rendered, names) == {name: rendered[name] for name in names}


def _compact_compile(name: str, kind: str) -> dspy.Module:
    """The compact program compiled with labeled_fewshot (fake LM) on a few labeled records."""
    import optimizers
    from evals import metrics_fullauto, metrics_planner
    from optimizer_support import decision_examples

    if kind == "full_auto":
        train, metric = decision_examples(8), metrics_fullauto.metric
    else:
        outcome = ExperimentLogEntry.model_validate(entry(4, "family:break_deps", True, 1780, 1802))
        train = [programs.planner_example(PlannerRecord(record_id=f"r{i}", episode_id="e1", iteration_id=4,
                                                        packet=packet, outcome=outcome))
                 for i, packet in enumerate([rich_packet(), *(p for p, _ in _planner_seed_packets())])]
        metric = metrics_planner.metric
    result = optimizers.get("labeled_fewshot")().compile(programs.get(name), train, train, metric, seed=1)
    return result.program


@pytest.mark.parametrize("name, kind", [("full_auto.compact", "full_auto"), ("planner.compact", "planner"),
                                        ("full_auto.compact_state", "full_auto"), ("full_auto.compact_cot", "full_auto")])
def test_a_compiled_compact_program_exports_loads_and_sends_the_training_prompt(tmp_path, fake_lm, name, kind):
    trained = _compact_compile(name, kind)
    assert all(len(p.demos) == 3 for p in trained.predictors())
    folder = _export(trained, name, kind, tmp_path / "export")
    if kind == "full_auto":
        given = summary(turn_count=4, no_progress_count=1, pending_approvals="1",
                        recent_actions='[{"action": "continue"}]', last_agent_message="Waiting for approval.")
        answer = {"reasoning": "Steps remain.", **DECISION} if name.endswith("_cot") else DECISION
        train_inputs = programs.decision_inputs(given)
    else:
        given, answer = rich_packet(), DIRECTIVE
        train_inputs = programs.planner_inputs(given)
    train_lm = DummyLM([answer] * 2)
    with dspy.context(lm=train_lm):
        trained(**train_inputs)
    expected = prompt_of(train_lm)
    text = json.dumps(expected, ensure_ascii=False)
    assert "[[ ## status ## ]]" in text or "[[ ## families ## ]]" in text  # the compact fields, demos included
    assert "thread_id" not in text and "strategy_family_constraints" not in text
    for module in (load_frozen(folder), load_frozen(folder, program=programs.spec(name).factory)):
        run_lm = DummyLM([answer] * 2)
        with dspy.context(lm=run_lm):
            if kind == "full_auto":
                decision, _, _ = module(given, GuardrailConfig())
                assert decision.action == "continue"
            else:
                assert not module(given).used_default
        assert prompt_of(run_lm) == expected
