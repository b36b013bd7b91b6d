"""programs.registry: every required program is registered with its spec; clear errors; register adds one."""

from __future__ import annotations

import dspy
import pytest

import programs
from program_support import LM_FULL_AUTO, LM_PLANNER, REQUIRED


def test_registry_lists_every_required_program_with_its_spec():
    names = programs.names()
    assert set(REQUIRED) <= set(names)
    assert programs.spec("rule").name == "full_auto.rules" and programs.resolve("rule") == "full_auto.rules"
    assert set(programs.names("planner")) >= {"planner.predict", "planner.cot", "planner.rules"}
    for name in REQUIRED:
        spec = programs.spec(name)
        assert spec.kind == name.split(".")[0] and spec.description
        assert spec.uses_lm == (name in LM_FULL_AUTO + LM_PLANNER)
        first, second = programs.get(name), programs.get(name)
        assert isinstance(first, dspy.Module) and first is not second


def test_registry_errors_are_clear():
    with pytest.raises(programs.UnknownProgramError, match="known programs: .*full_auto.predict"):
        programs.get("full_auto.nope")
    with pytest.raises(ValueError, match="already registered"):
        programs.register("full_auto.predict", dspy.Module, kind="full_auto", uses_lm=False, description="x")
    with pytest.raises(ValueError, match="already an alias"):
        programs.register("test.other", dspy.Module, kind="full_auto", uses_lm=False, description="x",
                          aliases=("rule",))
    with pytest.raises(ValueError, match="kind"):
        programs.register("test.bad_kind", dspy.Module, kind="chat", uses_lm=False, description="x")


def test_register_adds_a_program():
    programs.register("test.always_stop", programs.get("full_auto.always_continue").__class__, kind="full_auto",
                      uses_lm=False, description="test program", replace=True)
    assert "test.always_stop" in programs.names("full_auto")
