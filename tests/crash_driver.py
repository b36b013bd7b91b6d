"""Run a `guidebench` command that stops at a chosen point so a test can kill it there with SIGKILL.

    python tests/crash_driver.py STAGE MARKER -- guidebench arguments...

The command runs unchanged in this process; the driver only adds a pause: when the process reaches
STAGE it writes its pid to MARKER and sleeps, and the test sends `kill -9`. Stages:
- `lm:N`: inside the N-th call of the fake LM engine (the N-1 calls before it are finished);
- `export:staged`: the export folder is fully written in its staging place, not yet renamed into place;
- `export:swap`: the previous export was renamed away, the new one not yet renamed into place;
- `output:ROLE`: the output folder of the command whose staging role is ROLE (`import`, `leaderboard`,
  ... see `guidebench.outputs.WRITERS`) is written in its staging place but not yet marked finished;
- `import:N`: a sharded import (`guidebench.data.shards`) has finished N shards and is about to start the next
  (GUIDEBENCH_TEST_SHARD_RECORDS: the decisions a Full Auto shard holds, to cut a small log in several).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def _pause(marker: Path) -> None:
    marker.write_text(str(os.getpid()))
    time.sleep(600)  # killed here


def install(stage: str, marker: Path) -> None:
    """Install the pause for a stage."""
    if stage.startswith("lm:"):
        from guidebench.lm import fake as fake_lm

        calls = int(stage.split(":", 1)[1])
        original = fake_lm.FakeEngine.complete

        def complete(self, request):  # type: ignore[no-untyped-def]
            if self.calls + 1 >= calls and not marker.exists():
                _pause(marker)
            return original(self, request)

        fake_lm.FakeEngine.complete = complete
    elif stage == "export:staged":
        from guidebench import outputs

        replace = outputs._replace_folder

        def staged(staged_dir, out):  # type: ignore[no-untyped-def]
            _pause(marker)
            return replace(staged_dir, out)

        outputs._replace_folder = staged
    elif stage == "export:swap":
        from guidebench import outputs

        rename = os.rename

        def swap(src, dst):  # type: ignore[no-untyped-def]
            result = rename(src, dst)
            if ".old-" in str(dst):  # the previous export just moved aside
                _pause(marker)
            return result

        outputs.os = type(sys)("os_with_pause")
        outputs.os.__dict__.update(os.__dict__)
        outputs.os.rename = swap
    elif stage.startswith("output:"):
        from guidebench import outputs

        role = stage.split(":", 1)[1]
        commit = outputs._commit

        def unfinished(output, staging):  # type: ignore[no-untyped-def]
            if output.writer.role == role:
                _pause(marker)
            return commit(output, staging)

        outputs._commit = unfinished
    elif stage.startswith("import:"):
        from guidebench.data import shards

        after = int(stage.split(":", 1)[1])
        records = os.environ.get("GUIDEBENCH_TEST_SHARD_RECORDS")
        if records:  # a small Full Auto log in several shards
            from guidebench.data import fullauto_threads

            fullauto_threads.RECORDS_PER_SHARD = int(records)
        run = shards.UnitJob.run
        finished: list[int] = []

        def counted(self, unit, folder):  # type: ignore[no-untyped-def]
            if len(finished) >= after:
                _pause(marker)
            run(self, unit, folder)
            finished.append(unit.index)

        shards.UnitJob.run = counted
    else:
        raise SystemExit(f"unknown stage {stage!r}")


def main() -> int:
    stage, marker = sys.argv[1], Path(sys.argv[2])
    if sys.argv[3] != "--":
        raise SystemExit("usage: crash_driver.py STAGE MARKER -- ARGS...")
    install(stage, marker)
    from guidebench.cli import main as cli

    return cli(sys.argv[4:])


if __name__ == "__main__":
    sys.exit(main())
