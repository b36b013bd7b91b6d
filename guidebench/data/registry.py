"""The plug-in points of `guidebench data`: importers and simulators keyed by kind.

An importer is `run(ctx: ImportContext) -> None`: it reads `ctx.path`, counts every line in
`ctx.report`, quarantines what it cannot use with `ctx.reject(...)`, and hands each finished
record to `ctx.emit(record)`. `guidebench.data.import_logs` does the rest for every kind:
seeded split by group, the dataset folder, `import_report.json`, `quarantine.jsonl` and the card.

A simulator is a `SimulatorSpec`: `add_arguments(parser)` for `guidebench data simulate <kind>`
and `run(args) -> int`. Register both at import time of your module (see
`guidebench/data/fullauto.py`); `guidebench/data/__init__.py` imports the kind modules.
`ImportContext` (in `guidebench.data.context`) is re-exported here for importers.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from .context import ImportContext, parse_row_line

__all__ = ["IMPORTERS", "SIMULATORS", "ImportContext", "Importer", "SimulatorSpec", "parse_row_line",
           "register_importer", "register_simulator"]

Importer = Callable[[ImportContext], None]


@dataclass(frozen=True)
class SimulatorSpec:
    """`guidebench data simulate <kind>`: its help, its arguments and what it runs."""

    kind: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


IMPORTERS: dict[str, Importer] = {}
SIMULATORS: dict[str, SimulatorSpec] = {}


def register_importer(kind: str, importer: Importer) -> None:
    """Make `guidebench data import --kind <kind>` (and `import_logs(kind=...)`) use `importer`."""
    IMPORTERS[kind] = importer


def register_simulator(spec: SimulatorSpec) -> None:
    """Make `guidebench data simulate <spec.kind>` available."""
    SIMULATORS[spec.kind] = spec

