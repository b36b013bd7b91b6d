"""guidebench.lm.model_file: the model file is assembled from its chunks, verified and reused."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

import guidebench.lm.model_file as model_file
from guidebench.lm.model_file import ModelFileError, ensure_model


def _fake_package(tmp_path: Path, chunks: list[bytes], expected: str | None = None) -> SimpleNamespace:
    paths = []
    for index, data in enumerate(chunks):
        path = tmp_path / "pkg" / f"model.gguf.part{index:02d}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    digest = expected or hashlib.sha256(b"".join(chunks)).hexdigest()
    return SimpleNamespace(MODEL_NAME="model.gguf", EXPECTED_SHA256=digest, chunk_paths=lambda: paths)


def test_ensure_model_assembles_verifies_and_reuses(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"GGUF" + b"a" * 1000, b"b" * 500, b"c" * 7])
    monkeypatch.setattr(model_file, "_package", lambda: package)
    home = tmp_path / "home"
    path = ensure_model(home)
    assert path == home / "models" / "model.gguf"
    assert path.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 500 + b"c" * 7
    assert (home / "models" / "model.gguf.sha256").read_text().startswith(package.EXPECTED_SHA256)
    # A second call trusts the stamp (same size and mtime) and does not rebuild the file.
    mtime = path.stat().st_mtime_ns
    assert ensure_model(home) == path and path.stat().st_mtime_ns == mtime
    assert not list((home / "models").glob("*.partial-*"))


def test_ensure_model_rebuilds_a_corrupted_file(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"x" * 64, b"y" * 64])
    monkeypatch.setattr(model_file, "_package", lambda: package)
    path = ensure_model(tmp_path / "home")
    path.write_bytes(b"corrupted")
    assert ensure_model(tmp_path / "home").read_bytes() == b"x" * 64 + b"y" * 64


def test_ensure_model_refuses_chunks_with_the_wrong_hash(tmp_path, monkeypatch):
    package = _fake_package(tmp_path, [b"x" * 64], expected="0" * 64)
    monkeypatch.setattr(model_file, "_package", lambda: package)
    with pytest.raises(ModelFileError, match="SHA-256"):
        ensure_model(tmp_path / "home")
    assert not (tmp_path / "home" / "models" / "model.gguf").exists()


def test_ensure_model_names_missing_chunks(tmp_path, monkeypatch):
    missing = tmp_path / "gone.part00"
    package = SimpleNamespace(MODEL_NAME="m.gguf", EXPECTED_SHA256="0" * 64, chunk_paths=lambda: [missing])
    monkeypatch.setattr(model_file, "_package", lambda: package)
    with pytest.raises(ModelFileError, match="gone.part00"):
        ensure_model(tmp_path / "home")
