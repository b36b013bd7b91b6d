"""Shadow candidates with a fault planted, for the shadow runner's tests: they run in the shadow's own process, so
they are picklable (a module of `tests/`, on the path of the child too) and report through process-shared events."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

from runtime.fullauto import GuidanceDecision


def load_rules(folder: Path) -> Any:
    """The exported `full_auto.rules` module, loaded as the application loads it."""
    import programs
    from runtime import load_frozen

    return load_frozen(folder, program=programs.spec("full_auto.rules").factory, inputs=programs.decision_inputs)


class Faulty:
    """A real frozen module (the folder's, loaded in the process that runs it) whose `decide` has a fault:
    "raises", "hangs" (until `release`), "hangs_once" (its first call only, in any process), "garbage",
    "unparseable", "exits" (the process dies) or "spins" (busy for `spin_s`, then the module's decision).
    `started` is set and `calls` counted in whichever process calls it."""

    def __init__(self, folder: Path, fault: str, spin_s: float = 0.0):
        context = multiprocessing.get_context("spawn")
        self.folder, self.fault, self.spin_s = Path(folder), fault, spin_s
        self.module = load_rules(self.folder)
        self.manifest, self.path = self.module.manifest, self.module.path
        self.started, self.release = context.Event(), context.Event()
        self.calls = context.Value("i", 0)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "module"}  # the child loads its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.module = load_rules(self.folder)

    def decide(self, summary: Any, config: Any) -> Any:
        with self.calls.get_lock():
            self.calls.value += 1
            call = self.calls.value
        self.started.set()
        if self.fault == "raises":
            raise RuntimeError("the candidate broke")
        if self.fault == "hangs" or (self.fault == "hangs_once" and call == 1):
            self.release.wait()
        if self.fault == "garbage":
            return "banana"
        if self.fault == "unparseable":
            return GuidanceDecision(action="pause", confidence=0.0, parse_errors=["output is not JSON"])
        if self.fault == "exits":
            os._exit(3)
        if self.fault == "spins":
            until = time.perf_counter() + self.spin_s
            while time.perf_counter() < until:
                pass
        return self.module.decide(summary, config)


def alive(pid: int) -> bool:
    """True while a process of this id runs (a reaped child is gone, and so is a zombie: it has exited, and only
    waits for a parent that may never reap it, as an orphan in a container whose first process does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Unpicklable:
    """A candidate that cannot reach the shadow's process: it does not pickle (`pickles` False), or it pickles but
    cannot be rebuilt there."""

    def __init__(self, folder: Path, pickles: bool):
        module = load_rules(folder)
        self.manifest, self.path, self.pickles = module.manifest, module.path, pickles

    def __reduce__(self) -> Any:
        if not self.pickles:
            raise TypeError("cannot pickle this candidate")
        return _refuse, ()

    def decide(self, summary: Any, config: Any) -> Any:
        raise AssertionError("never called")


def _refuse() -> None:
    raise RuntimeError("this candidate cannot be rebuilt in another process")


class FaultyPlanner:
    """A real frozen planner (the folder's, loaded in the process that runs it) whose `decide` has a fault:
    "raises", "hangs_once" (its first call only, in any process, until `release`), "exits_once" (the process
    dies on its first call), "defaults" (only its safe default), "spins" (busy for `spin_s`, then the module's decision) or "none" (the module's decision).
    `pids` records the process of each call."""

    def __init__(self, folder: Path, fault: str, spin_s: float = 0.0):
        context = multiprocessing.get_context("spawn")
        self.folder, self.fault, self.spin_s = Path(folder), fault, spin_s
        self.module = load_planner(self.folder)
        self.manifest, self.path = self.module.manifest, self.module.path
        self.release = context.Event()
        self.calls, self.pid = context.Value("i", 0), context.Value("i", 0)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "module"}  # the child loads its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.module = load_planner(self.folder)

    def decide(self, packet: Any) -> Any:
        with self.calls.get_lock():
            self.calls.value += 1
            call = self.calls.value
        self.pid.value = os.getpid()
        if self.fault == "raises":
            raise ValueError("boom")
        if self.fault == "hangs_once" and call == 1:
            self.release.wait()
        if self.fault == "exits_once" and call == 1:
            os._exit(3)
        if self.fault == "spins":
            until = time.perf_counter() + self.spin_s
            while time.perf_counter() < until:
                pass
        decision = self.module.decide(packet)
        if self.fault == "defaults":
            return decision._replace(used_default=True, errors=["unusable answer"])
        return decision


def load_planner(folder: Path) -> Any:
    """An exported `planner.rules` module, loaded as the application loads it."""
    import programs
    from runtime import load_frozen

    return load_frozen(folder, program=programs.get("planner.rules"))


def _rules_class() -> Any:
    from programs.rules_planner import PlannerRules

    return PlannerRules


class RaisingRules(_rules_class()):  # type: ignore[misc]
    """planner.rules whose program raises: the loaded module answers its safe default, and says it raised."""

    def forward(self, **inputs: Any) -> Any:
        raise ValueError("the program broke")


class PrintingRules(_rules_class()):  # type: ignore[misc]
    """planner.rules that prints on every packet, through Python and straight to file descriptor 1."""

    def forward(self, **inputs: Any) -> Any:
        print("CANDIDATE-STDOUT print", flush=True)
        os.write(1, b"CANDIDATE-STDOUT fd\n")
        return super().forward(**inputs)
