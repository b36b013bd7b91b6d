"""Training examples read back from the dataset when a field of theirs is first asked for.

A compile holds its train split as examples for the optimizer. A trained planner's fit (`planner.learned` with
`fit`) reads only their record ids: its outcome model is fit on the records streamed from the split
(`guidebench.evaluation.outcome_models`) and found again by those ids. Held whole, 70,000 examples of a year of
kernel-loop logs (each with its packet as JSON and the inputs rendered from it) would take about 3 GB; a
`StoredExample` holds its record id and its row in the split, and builds the whole example (the same one:
`programs.planner_example` of the record read back from the memory-mapped Arrow file) the first time any
other field is asked for, keeping it from then on.

A trained Full Auto model's fit (`full_auto.learned` with `fit`) reads its examples' record ids, threads and label
actions, and the features of their inputs (`programs.example_features`): a `StoredExample` can carry those fields
(`known`) and the features, computed once when its record was read, so only the few examples the fit scores
(its held-out sample) are ever built whole.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import dspy

from programs import CARRIED_FEATURES


class StoredExample(dspy.Example):
    """A `dspy.Example` whose fields are read from the dataset when first needed; its record id is known up front."""

    def __init__(self, record_id: str, build: Callable[[], dspy.Example], known: Optional[dict[str, Any]] = None,
                 features: Any = None) -> None:
        # Not Example.__init__: it would set `_store`, which here is read back on first use.
        self.__dict__.update(_known={"record_id": record_id, **(known or {})}, _build=build, _full=None, _demos=[])
        if features is not None:  # what `programs.example_features` gives without the example built
            self.__dict__[CARRIED_FEATURES] = features

    def _whole(self) -> dspy.Example:
        full = self.__dict__["_full"]
        if full is None:
            full = self.__dict__["_build"]()
            self.__dict__["_full"] = full
        return full

    @property  # type: ignore[override]
    def _store(self) -> dict[str, Any]:
        return self._whole()._store

    @_store.setter
    def _store(self, value: dict[str, Any]) -> None:
        self._whole()._store = value

    @property  # type: ignore[override]
    def _input_keys(self) -> Any:
        return self._whole()._input_keys

    @_input_keys.setter
    def _input_keys(self, value: Any) -> None:
        self._whole()._input_keys = value

    @property
    def loaded(self) -> bool:
        """Whether the whole example was read back (a field other than the record id was asked for)."""
        return self.__dict__["_full"] is not None

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.__dict__["_known"] and not self.loaded:
            return self.__dict__["_known"][key]
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        if key in self.__dict__["_known"] and not self.loaded:
            return self.__dict__["_known"][key]
        return super().__getitem__(key)

    def __getattr__(self, key: str) -> Any:
        known = self.__dict__.get("_known", {})
        if key in known and not self.loaded:
            return known[key]
        return super().__getattr__(key)

    # What builds a new example of the same type (`type(self)(base=...)`) builds a plain one from the whole.
    def inputs(self) -> dspy.Example:
        return self._whole().inputs()

    def labels(self) -> dspy.Example:
        return self._whole().labels()

    def copy(self, **kwargs: Any) -> dspy.Example:
        return self._whole().copy(**kwargs)

    def with_inputs(self, *keys: str) -> dspy.Example:
        return self._whole().with_inputs(*keys)

    def without(self, *keys: str) -> dspy.Example:
        return self._whole().without(*keys)


__all__ = ["StoredExample"]
