"""guidebench.demo.plan: the gates and recipe files the demo writes load."""

from __future__ import annotations

from pathlib import Path

from guidebench import demo


def test_gates_and_recipes_written_by_the_demo_load(tmp_path: Path):
    import optimizers
    from guidebench.release.gates import load_gates

    gates_file = tmp_path / "gates.toml"
    gates_file.write_text(demo.gates_text(4))
    gates = load_gates(gates_file)
    assert gates.min_records == 20 and gates.max_p_value == 0.05 and gates.max_increase["parse_failure_rate"] == 0.0
    for program, optimizer in demo.COMPILES:
        settings = demo.recipe_settings(optimizer, demo.QUICK, program.split(".")[0])
        recipe_file = tmp_path / f"{program}-{optimizer}.toml"
        recipe_file.write_text(demo.recipe_text(optimizer, settings))
        recipe = optimizers.load(name=optimizer, path=str(recipe_file))
        assert {name: getattr(recipe.settings, name) for name in settings} == settings
    assert demo.recipe_settings("fit", demo.QUICK, "full_auto") == {"C": [0.5, 2.0], "class_weight": ["none"]}
