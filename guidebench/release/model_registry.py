"""Frozen modules in the MLflow model registry: one registered model per package name.

A promoted module becomes a model version whose source is a copy of the export folder logged as
run artifacts (`frozen_module/`), so a champion can always be fetched again and re-verified. The
alias `champion` marks the deployed version and `previous` the one it replaced; each version
records the version it replaced (tag `guidebench.replaced`) so rollbacks can walk back the chain.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from guidebench.errors import GuidebenchError

CHAMPION = "champion"
PREVIOUS = "previous"
EXPERIMENT = "guidebench-promotions"
ARTIFACT_DIR = "frozen_module"
TAG_PACKAGE = "guidebench.package"
TAG_DIGEST = "guidebench.digest"
TAG_REPLACED = "guidebench.replaced"
TAG_STATE = "promotion_state"
_PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@dataclass(frozen=True)
class RegisteredModule:
    """One model version of a frozen module."""

    name: str
    version: str
    package: str
    digest: str
    source: str
    run_id: Optional[str]
    state: str
    replaced: Optional[str]


class ModuleRegistry:
    """Registered frozen modules, their aliases and promotion states, on one tracking store."""

    def __init__(self, tracking_uri: Optional[str] = None):
        from mlflow.tracking import MlflowClient

        from guidebench.tracking import runs as tracking

        self.tracking_uri = tracking.configure(tracking_uri)
        self.client = MlflowClient(tracking_uri=self.tracking_uri)

    def _module(self, mv: Any) -> RegisteredModule:
        tags = dict(mv.tags or {})
        return RegisteredModule(name=mv.name, version=str(mv.version), package=tags.get(TAG_PACKAGE, ""),
                                digest=tags.get(TAG_DIGEST, ""), source=mv.source, run_id=mv.run_id,
                                state=tags.get(TAG_STATE, "candidate"), replaced=tags.get(TAG_REPLACED) or None)

    def alias(self, name: str, alias: str) -> Optional[RegisteredModule]:
        """The version holding an alias, or None (also when the model is not registered)."""
        from mlflow.exceptions import MlflowException

        try:
            return self._module(self.client.get_model_version_by_alias(name, alias))
        except MlflowException:
            return None

    def version(self, name: str, version: str) -> RegisteredModule:
        """One model version."""
        return self._module(self.client.get_model_version(name, version))

    def find(self, name: str, digest: str) -> Optional[RegisteredModule]:
        """The version of `name` registered with this folder digest, if any."""
        from mlflow.exceptions import MlflowException

        try:
            versions = self.client.search_model_versions(f"name = '{name}'")
        except MlflowException:
            return None
        for mv in versions:
            if (mv.tags or {}).get(TAG_DIGEST) == digest:
                return self._module(mv)
        return None

    def _experiment_id(self) -> str:
        import mlflow

        found = mlflow.get_experiment_by_name(EXPERIMENT)
        if found is not None:
            return found.experiment_id
        location = None
        if self.tracking_uri.startswith("sqlite:///"):
            # Artifacts beside the local database, like the other experiments of the workbench.
            location = (Path(self.tracking_uri[len("sqlite:///"):]).parent / "mlartifacts" / EXPERIMENT).as_uri()
        return mlflow.create_experiment(EXPERIMENT, artifact_location=location)

    def log_attempt(self, *, run_name: str, params: Mapping[str, str], metrics: Mapping[str, float],
                    tags: Mapping[str, str], module_dir: Optional[Path] = None,
                    artifacts: Mapping[str, Path] = {}) -> tuple[str, str]:
        """One MLflow run for a promotion attempt; returns (run id, artifact URI of the module copy)."""
        import mlflow

        with mlflow.start_run(experiment_id=self._experiment_id(), run_name=run_name, tags=dict(tags)) as run:
            mlflow.log_params(dict(params))
            if metrics:
                mlflow.log_metrics(dict(metrics))
            for path in artifacts.values():
                mlflow.log_artifact(str(path))
            if module_dir is not None:
                mlflow.log_artifacts(str(module_dir), ARTIFACT_DIR)
            return run.info.run_id, f"{run.info.artifact_uri}/{ARTIFACT_DIR}"

    def register(self, name: str, *, source: str, run_id: str, package: str, digest: str,
                 tags: Mapping[str, str]) -> RegisteredModule:
        """A new model version for a module copy (the registered model is created on first use)."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(name)
        except MlflowException:
            self.client.create_registered_model(name, description="guidebench frozen module")
        all_tags = {TAG_PACKAGE: package, TAG_DIGEST: digest, TAG_STATE: "staged", **tags}
        mv = self.client.create_model_version(name, source=source, run_id=run_id, tags=all_tags)
        return self._module(self.client.get_model_version(name, mv.version))

    def set_state(self, name: str, version: str, state: str) -> None:
        """Record a version's promotion state as a tag."""
        self.client.set_model_version_tag(name, version, TAG_STATE, state)

    def make_champion(self, name: str, version: str) -> Optional[RegisteredModule]:
        """Point `champion` at a version and `previous` at the one it replaces; returns that one."""
        old = self.alias(name, CHAMPION)
        if old is not None and old.version == version:
            return self.alias(name, PREVIOUS)
        if old is not None:
            self.client.set_model_version_tag(name, version, TAG_REPLACED, old.version)
            self.client.set_registered_model_alias(name, PREVIOUS, old.version)
        self.client.set_registered_model_alias(name, CHAMPION, version)
        self.set_state(name, version, "promoted")
        return old

    def roll_back(self, name: str) -> tuple[RegisteredModule, RegisteredModule]:
        """Make `previous` the champion again; returns (restored, rolled back)."""
        current, previous = self.alias(name, CHAMPION), self.alias(name, PREVIOUS)
        if current is None:
            raise GuidebenchError(f"{name}: no champion in the model registry ({self.tracking_uri})")
        if previous is None:
            raise GuidebenchError(f"{name}: champion version {current.version} has no previous version to roll back to")
        self.client.set_registered_model_alias(name, CHAMPION, previous.version)
        self.set_state(name, current.version, "rolled_back")
        self.set_state(name, previous.version, "promoted")
        # The version before the restored one (if any) becomes the new `previous`.
        if previous.replaced and previous.replaced != current.version:
            self.client.set_registered_model_alias(name, PREVIOUS, previous.replaced)
        else:
            self.client.delete_registered_model_alias(name, PREVIOUS)
        return self.version(name, previous.version), self.version(name, current.version)

    def download(self, module: RegisteredModule, into: Optional[Path] = None) -> Path:
        """A local copy of a registered module folder."""
        from mlflow.artifacts import download_artifacts

        target = Path(into or tempfile.mkdtemp(prefix="guidebench-champion-"))
        # MLflow reads this at call time; its progress bar is noise in a command's output.
        previous = os.environ.get(_PROGRESS_ENV)
        os.environ[_PROGRESS_ENV] = "false"
        try:
            return Path(download_artifacts(artifact_uri=module.source, dst_path=str(target)))
        finally:
            if previous is None:
                os.environ.pop(_PROGRESS_ENV, None)
            else:
                os.environ[_PROGRESS_ENV] = previous
