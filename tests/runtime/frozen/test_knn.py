"""runtime.frozen.knn: plain-Python TF-IDF and hashing vectorizers equal to scikit-learn's, and a
knn_fewshot compile that exports, loads with `runtime.load_frozen` and picks the same demos, and makes
the same decisions, as the workbench on the same inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import HashingVectorizer as SkHashing
from sklearn.feature_extraction.text import TfidfVectorizer as SkTfidf
from sklearn.utils import murmurhash3_32 as sk_murmurhash3_32

import optimizers
import programs
from evals import metrics_fullauto
from evals.data import load_records
from frozen_support import edit_json, export_program, hub_relative
from guidebench.errors import GuidebenchError
from guidebench.release.export import ExportSource, export_frozen, load_exported
from optimizer_support import decision_examples, decision_records
from optimizers.knn_fewshot import NearestDemos
from runtime import load_frozen
from runtime.frozen.knn import (TOKEN_PATTERN, DemoSelector, HashingVectorizer, LexicalIndex, TfidfVectorizer,
                                example_text, murmurhash3_32, top_k, vectorizer_from_state)
from runtime.frozen.manifest import KNN_FILE, FrozenModuleError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sample_texts(tmp_path_factory) -> tuple[list[str], list[str]]:
    """Every input of the committed Full Auto sample as the KNN text (train pool, test queries)."""
    from guidebench.data import import_logs

    out = tmp_path_factory.mktemp("sample") / "fa"
    import_logs(REPO / "datasets" / "sample" / "fullauto", "fullauto", out, progress=False)
    fields = [f for f in programs.decision_inputs(load_records(out, "train")[0]) if f not in ("thread_id", "turn_id")]
    texts = {split: [example_text(programs.decision_inputs(r), fields) for r in load_records(out, split)]
             for split in ("train", "test")}
    return texts["train"], texts["test"]


def _dense(rows: list[dict[int, float]], width: int) -> np.ndarray:
    out = np.zeros((len(rows), width))
    for i, row in enumerate(rows):
        for j, value in row.items():
            out[i, j] = value
    return out


def test_tfidf_equals_scikit_learn(sample_texts) -> None:
    pool, queries = sample_texts
    ours = TfidfVectorizer(max_features=None).fit(pool)
    sk = SkTfidf(ngram_range=(1, 2), sublinear_tf=True, token_pattern=TOKEN_PATTERN, lowercase=True, norm="l2",
                 dtype=np.float64).fit(pool)
    assert ours.vocabulary == {term: int(index) for term, index in sk.vocabulary_.items()}
    np.testing.assert_allclose(ours.idf, sk.idf_, rtol=1e-13)
    width = len(ours.vocabulary)
    for texts in (pool[:40], queries):
        np.testing.assert_allclose(_dense(ours.transform(texts), width), sk.transform(texts).toarray(), atol=1e-13)
    index = LexicalIndex(ours, pool)
    matrix = sk.transform(pool)
    for query in queries:
        np.testing.assert_allclose(index.scores(query), (matrix @ sk.transform([query]).T).toarray().ravel(),
                                   atol=1e-12)


def test_tfidf_max_features_keeps_the_most_frequent_terms(sample_texts) -> None:
    pool, _ = sample_texts
    ours = TfidfVectorizer(max_features=300).fit(pool)
    sk = SkTfidf(ngram_range=(1, 2), sublinear_tf=True, token_pattern=TOKEN_PATTERN, max_features=300,
                 dtype=np.float64).fit(pool)
    counts = dict(zip(sorted(SkTfidf(ngram_range=(1, 2), token_pattern=TOKEN_PATTERN, use_idf=False)
                             .fit(pool).vocabulary_),
                      np.asarray(SkTfidf(ngram_range=(1, 2), token_pattern=TOKEN_PATTERN, use_idf=False, norm=None)
                                 .fit_transform(pool).sum(axis=0)).ravel()))
    assert len(ours.vocabulary) == len(sk.vocabulary_) == 300
    # Both keep the 300 most frequent n-grams; they may differ only among n-grams tied at the cut.
    cut = min(counts[term] for term in sk.vocabulary_)
    differ = set(ours.vocabulary) ^ set(sk.vocabulary_)
    assert all(counts[term] == cut for term in differ)
    shared = sorted(set(ours.vocabulary) & set(sk.vocabulary_))
    np.testing.assert_allclose([ours.idf[ours.vocabulary[t]] for t in shared],
                               [sk.idf_[sk.vocabulary_[t]] for t in shared], rtol=1e-13)


def test_hashing_equals_scikit_learn(sample_texts) -> None:
    pool, queries = sample_texts
    ours = HashingVectorizer(n_features=2**14)
    sk = SkHashing(n_features=2**14, ngram_range=(1, 2), alternate_sign=False, token_pattern=TOKEN_PATTERN,
                   lowercase=True, norm="l2", dtype=np.float64)
    texts = pool[:60] + queries
    np.testing.assert_allclose(_dense(ours.transform(texts), 2**14), sk.transform(texts).toarray(), atol=1e-13)


def test_murmurhash_equals_scikit_learn() -> None:
    rng = random.Random(5)
    samples = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24))) for _ in range(3000)]
    samples += ["naïve ünïcode ✓".encode(), b"", b"turn_plan", b"pending_approvals 2"]
    assert [murmurhash3_32(b) for b in samples] == [sk_murmurhash3_32(b, seed=0) for b in samples]


def test_vectorizer_state_is_json_and_loads_back_the_same(sample_texts) -> None:
    pool, queries = sample_texts
    for vectorizer in (TfidfVectorizer().fit(pool), HashingVectorizer()):
        loaded = vectorizer_from_state(json.loads(json.dumps(vectorizer.to_state())))
        assert loaded.transform(queries) == vectorizer.transform(queries)
    assert top_k([0.5, 0.9, 0.5, 0.1], 3) == [2, 0, 1] and top_k([0.5, 0.9, 0.5], 2, nearest_last=False) == [1, 0]


# ----- a knn_fewshot program frozen --------------------------------------------------------------

@pytest.fixture
def knn_state(tmp_path, fake_lm) -> Path:
    """A knn_fewshot compile of full_auto.predict (fake LM), saved as the compile saves its state."""
    recipe = optimizers.get("knn_fewshot")().with_overrides(k=2)
    result = recipe.compile(programs.get("full_auto.predict"), decision_examples(16), decision_examples(4, 100),
                            metrics_fullauto.metric)
    path = tmp_path / "program.json"
    path.write_text(json.dumps(result.program.dump_state()), encoding="utf-8")
    return path


@pytest.mark.parametrize("vectorizer", ["tfidf", "hashing"])
def test_a_knn_compile_exports_and_decides_like_the_workbench(tmp_path, fake_lm, knn_state, vectorizer) -> None:
    state = json.loads(knn_state.read_text())
    state["knn"]["vectorizer"] = vectorizer
    knn_state.write_text(json.dumps(state))
    out = tmp_path / "module"
    result = export_program("full_auto.predict", out, state=knn_state)
    manifest = result.manifest
    assert manifest.demo_selection is not None and manifest.demo_selection.vectorizer == vectorizer
    assert manifest.demo_selection.pool_size == 16 and manifest.demo_selection.k == 2
    assert json.loads((out / KNN_FILE).read_text())["vectorizer"]["kind"] == vectorizer
    # What the original runtime's manifest can carry is said in ours: no demos in the hub file.
    assert manifest.dsrs_notes and "demos chosen per input are not carried" in manifest.dsrs_notes[0]
    assert result.hub.manifest.demo_count == 0 and result.hub.demos == []

    workbench = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    assert isinstance(workbench, NearestDemos)
    standalone = load_frozen(out, lm=fake_lm)
    installed = load_exported(out, lm=fake_lm)
    for record in decision_records(8, 300):
        inputs = programs.decision_inputs(record)
        chosen = [{k: v for k, v in demo.toDict().items()} for demo in workbench.nearest(inputs)]
        assert len(chosen) == 2
        assert standalone.program.nearest(inputs) == chosen
        assert installed.program.nearest(inputs) == chosen
        expected = workbench(**inputs).decision
        prompt = fake_lm.history[-1]["messages"]
        for module in (standalone, installed):
            decision, _raw, _usage = module.decide(record.summary)
            assert decision == expected
            assert fake_lm.history[-1]["messages"] == prompt  # the same demos, in the same order, reach the LM


def test_a_minilm_knn_program_is_refused_with_one_line(tmp_path, fake_lm) -> None:
    program = NearestDemos(programs.get("full_auto.predict"), decision_examples(4), vectorizer="minilm")
    source = ExportSource(entry="full_auto.predict", kind="full_auto", uses_lm=True, program=program,
                          installed=programs.get("full_auto.predict"))
    with pytest.raises(GuidebenchError) as caught:
        export_frozen(source, name="X", version="0.1.0", out=tmp_path / "module")
    assert "\n" not in str(caught.value) and "'minilm' vectorizer cannot be exported" in str(caught.value)
    assert not (tmp_path / "module").exists()


def test_demo_selection_is_checked_against_the_manifest(tmp_path, fake_lm, knn_state) -> None:
    out = tmp_path / "module"
    export_program("full_auto.predict", out, state=knn_state)
    changed = tmp_path / "k"
    import shutil

    shutil.copytree(out, changed)
    edit_json(changed, KNN_FILE, lambda data: data.update(k=3))
    with pytest.raises(FrozenModuleError, match=r"knn.json has k 3, manifest.json declares 2"):
        load_frozen(changed)
    plain = tmp_path / "plain"
    export_program("full_auto.predict", plain)
    (plain / KNN_FILE).write_text((out / KNN_FILE).read_text())
    edit_json(plain, "manifest.json", lambda data: None)  # reseal the checksums with knn.json listed
    with pytest.raises(FrozenModuleError, match=r"knn.json is present but manifest.json declares no demo_selection"):
        load_frozen(plain)
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    edit_json(broken, KNN_FILE, lambda data: data["vectorizer"].update(kind="minilm"))
    with pytest.raises(FrozenModuleError, match=r"knn.json is invalid: unknown vectorizer kind 'minilm'"):
        load_frozen(broken)


def test_a_format_1_module_still_loads(tmp_path, fake_lm) -> None:
    out = tmp_path / "module"
    export_program("full_auto.predict", out)

    def as_version_1(data: dict) -> None:
        data["format_version"] = 1
        del data["demo_selection"], data["dsrs_notes"]
        data.pop("provenance", None)  # version 5 added it

    edit_json(out, "manifest.json", as_version_1)
    module = load_frozen(out, lm=fake_lm)
    decision, _raw, _usage = module.decide(decision_records(1)[0].summary)
    assert decision.action in ("continue", "pause", "stop", "review")
    assert hub_relative(out).startswith("dsrs/optimized/")


def test_selector_state_round_trips(knn_state) -> None:
    state = json.loads(knn_state.read_text())
    workbench = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    selector = workbench.frozen_selection()
    again = DemoSelector.from_state(json.loads(json.dumps(selector.to_state())))
    for record in decision_records(4, 400):
        inputs = programs.decision_inputs(record)
        assert again.nearest_positions(inputs) == selector.nearest_positions(inputs)


# ----- the order of the chosen demos ----------------------------------------------------------------

def test_top_k_in_pool_order_keeps_the_nearest_last() -> None:
    scores = [0.5, 0.9, 0.2, 0.7]
    assert top_k(scores, 3) == [0, 3, 1]  # by similarity, the nearest last
    assert top_k(scores, 3, order="pool") == [0, 3, 1]  # here the same: 0 and 3 already in pool order
    assert top_k([0.7, 0.9, 0.2, 0.5], 3, order="pool") == [0, 3, 1]  # by similarity it is [3, 0, 1]
    assert top_k([0.7, 0.9, 0.2, 0.5], 3, nearest_last=False, order="pool") == [0, 1, 3]
    with pytest.raises(ValueError, match="demo order must be one of similarity, pool"):
        top_k(scores, 2, order="random")


def test_a_pool_ordered_knn_export_picks_the_workbenchs_demos_in_its_order(tmp_path, fake_lm, knn_state) -> None:
    state = json.loads(knn_state.read_text())
    state["knn"]["demo_order"] = "pool"
    knn_state.write_text(json.dumps(state))
    out = tmp_path / "module"
    export_program("full_auto.predict", out, state=knn_state)
    assert json.loads((out / KNN_FILE).read_text())["demo_order"] == "pool"
    workbench = optimizers.load_compiled(programs.get("full_auto.predict"), state)
    standalone = load_frozen(out, lm=fake_lm)
    for record in decision_records(8, 300):
        inputs = programs.decision_inputs(record)
        assert standalone.program.nearest(inputs) == [demo.toDict() for demo in workbench.nearest(inputs)]
    edit_json(out, KNN_FILE, lambda data: data.update(demo_order="random"))
    with pytest.raises(FrozenModuleError, match=r"knn.json is invalid: `demo_order` must be one of similarity, pool"):
        load_frozen(out)
