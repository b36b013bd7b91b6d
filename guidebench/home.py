"""The workbench's state folder, in one place: every part of the application (the LM's model file and caches,
MLflow, checkpoints, searches, the promotion ledger) finds it here.

It sits at the application's top level, below `guidebench.lm` and `guidebench.tracking`, so both import it
downward. The path is absolute, fixed when asked: a command that changes directory later still writes where
it started, and two parts never disagree about a relative `.guidebench`.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "GUIDEBENCH_HOME"
DEFAULT_HOME = ".guidebench"


def guidebench_home() -> Path:
    """The workbench's state folder, absolute: `$GUIDEBENCH_HOME`, else `./.guidebench`."""
    return Path(os.environ.get(HOME_ENV) or DEFAULT_HOME).absolute()
