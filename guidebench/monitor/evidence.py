"""The champion's own evidence at promotion, as the monitor's baselines.

Where a watched quantity was measured when the module was promoted, its baseline is that measurement: the
promotion ledger's entry for this module (`PromotionRecord.evidence.candidate_metrics`: the paired replay on the
held-out split, with its n), else the export manifest's `scorecard` (the replay on the split the manifest names).
Both hold a value and n; the monitor puts its own interval around the value at its share of the budget
(`evals.sequential.fixed_interval`), not the 95% bootstrap interval stored there. Quantities the evidence never
measured (the action mix, parse failures in production's own parser, a planner's validity per attempt) take
their baseline from the reference window (`checks`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from evals.sequential import fixed_interval

from guidebench.errors import GuidebenchError
from guidebench.monitor._base import Baseline, MetricSpec


@dataclass
class Champion:
    """The deployed module and what was measured about it when it was promoted."""

    path: Path
    name: str
    version: str
    kind: str
    digest: str
    manifest: Any
    ledger_entry: Optional[Any] = None  # the PromotionRecord that promoted it
    metrics: dict[str, Any] = field(default_factory=dict)  # name -> MetricInterval
    source: str = ""
    program_state: dict[str, Any] = field(default_factory=dict)

    @property
    def package(self) -> str:
        """name@version."""
        return f"{self.name}@{self.version}"


def _program_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / "program.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_champion(path: Path, ledger: Optional[Path] = None) -> Champion:
    """Read an export folder's manifest and its promotion ledger entry; errors are one line naming the file."""
    from runtime.frozen.manifest import FrozenManifest

    from guidebench.release.promotion import PromotionLedger, folder_digest

    manifest_file = Path(path) / "manifest.json"
    try:
        manifest = FrozenManifest.model_validate_json(manifest_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GuidebenchError(f"--module {path}: no manifest.json; give the folder `guidebench export` wrote") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise GuidebenchError(f"--module {manifest_file}: not a frozen module manifest "
                              f"({str(exc).splitlines()[0]})") from None
    try:
        digest = folder_digest(Path(path))
    except Exception:  # a folder without checksums still has a manifest to compare with
        digest = ""
    champion = Champion(path=Path(path), name=manifest.name, version=manifest.version, kind=manifest.kind,
                        digest=digest, manifest=manifest, program_state=_program_state(Path(path)))
    entry = None
    if digest:
        records = PromotionLedger(ledger).records()
        entry = next((r for r in reversed(records) if r.module.digest == digest and r.evidence is not None
                      and r.outcome in ("promoted", "staged")), None)
    if entry is not None:
        champion.ledger_entry = entry
        champion.metrics = dict(entry.evidence.candidate_metrics)
        champion.source = (f"the promotion ledger entry {entry.attempt_id} ({entry.at}): replay on split "
                           f"{entry.evidence.split} of {entry.evidence.dataset_id}")
    elif manifest.scorecard:
        champion.metrics = dict(manifest.scorecard)
        champion.source = (f"the manifest's scorecard: replay on split {manifest.split or '?'} of "
                           f"{manifest.dataset_id or 'an unnamed dataset'}")
    return champion


def evidence_baseline(spec: MetricSpec, champion: Optional[Champion], alpha_k: float) -> Optional[Baseline]:
    """The metric's baseline from the champion's evidence (None: the evidence never measured it)."""
    if spec.exact is not None:
        return Baseline(value=spec.exact, low=spec.exact, high=spec.exact, n=0,
                        source=f"{spec.exact:g} exactly, by construction")
    if champion is None:
        return None
    for name in spec.evidence:
        measured = champion.metrics.get(name)
        value = getattr(measured, "value", None)
        n = int(getattr(measured, "n", 0) or 0)
        if value is None or n <= 0 or not 0.0 <= value <= 1.0:
            continue
        low, high = fixed_interval(float(value), n, alpha=alpha_k / 2, binary=spec.binary)
        return Baseline(value=float(value), low=low, high=high, n=n, source=f"{name} in {champion.source}")
    return None
