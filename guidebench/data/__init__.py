"""Logs in: import decision and experiment logs into versioned datasets; simulators' writers.

`import_logs(path, kind, out, seed=0) -> ImportReport` runs the importer registered for `kind`
and writes the dataset folder (see docs/architecture.md). Importers and simulators are plug-ins
keyed by kind (`IMPORTERS`, `SIMULATORS` in `guidebench.data.registry`): the `fullauto` kind
lives in `guidebench/data/fullauto.py`, the `experiments` kind in `guidebench/data/experiments.py`.
"""

from __future__ import annotations

from guidebench.data.ingest import ImportReport, Quarantine
from guidebench.data.pipeline import NothingImportedError, import_logs
from guidebench.data.registry import IMPORTERS, SIMULATORS, ImportContext, SimulatorSpec, register_importer, register_simulator

# Each kind module registers its importer (and simulator) when imported; in this order (the registries' order).
from guidebench.data import fullauto, fullauto_writer, experiments  # noqa: F401  (registers the kinds)

__all__ = [
    "IMPORTERS", "SIMULATORS", "ImportContext", "ImportReport", "NothingImportedError", "Quarantine",
    "SimulatorSpec", "import_logs", "register_importer", "register_simulator",
]
