"""guidebench: evidence-driven optimization and evaluation of the decision programs of autonomous loops.

The application's subpackages (`guidebench.lm`, `.data`, `.tracking`, `.leaderboard`, `.release`, `.search`,
`.commands`) each re-export their own public names; the top level re-exports the one error every layer of the
application raises for a user's mistake, lazily (`runtime._lazy`), so `import guidebench` loads nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.errors import GuidebenchError

__version__ = "0.1.0"

_WHERE: dict[str, str] = {"GuidebenchError": "errors"}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
