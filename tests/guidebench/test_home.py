"""guidebench.home: one state folder, absolute, for every part of the application."""

from __future__ import annotations

from guidebench.home import guidebench_home


def test_home_honours_the_environment_and_is_absolute(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "gbhome"))
    assert guidebench_home() == tmp_path / "gbhome"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GUIDEBENCH_HOME", "relative-home")
    assert guidebench_home() == tmp_path / "relative-home"
    for unset in ("", None):
        if unset is None:
            monkeypatch.delenv("GUIDEBENCH_HOME")
        else:
            monkeypatch.setenv("GUIDEBENCH_HOME", unset)
        assert guidebench_home() == tmp_path / ".guidebench" and guidebench_home().is_absolute()


def test_the_lm_and_tracking_find_the_same_home(tmp_path, monkeypatch):
    # The model file and DSPy cache (guidebench.lm) and the MLflow store (guidebench.tracking) once each had
    # their own function, one relative and one absolute: after a chdir they pointed at different folders.
    from guidebench.lm import engine, factory, server
    from guidebench.tracking import runs

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GUIDEBENCH_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    homes = {module.__name__: module.guidebench_home() for module in (engine, factory, server, runs)}
    assert set(homes.values()) == {tmp_path / ".guidebench"}, homes
    assert runs.default_tracking_uri() == f"sqlite:///{tmp_path / '.guidebench' / 'mlflow.db'}"
