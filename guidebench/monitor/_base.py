"""Record shapes of the monitor: what is watched, the baseline it is held to, the running state kept between runs,
and the alarms. pydantic models are the single source of truth; `state.py` writes them, the rest reads them.

The error budget: one `alpha` (default 0.05) for everything a monitor of one loop ever says, split by Bonferroni
over that loop's watched metrics (alpha_k = alpha / K). Each metric spends half of its share on the interval of its
baseline (measured once, on n records) and half on the confidence sequence of the live records (valid at every
record at once). An alarm fires when the two are disjoint. With no change, a metric alarms only if its baseline
interval or its confidence sequence misses the true mean, so the chance that any alarm ever fires is at most alpha.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

LoopKind = Literal["full_auto", "planner"]
STATE_VERSION = 1
DEFAULT_ALPHA = 0.05
DEFAULT_REFERENCE = {"full_auto": 500, "planner": 400}  # records that make the baseline when no evidence has one
SERIES_POINTS = 600  # points kept per metric for the page; older ones are thinned, never the latest
METHOD = ("empirical-Bernstein confidence sequence (Howard, Ramdas, McAuliffe & Sekhon 2021, stitching boundary) "
          "against the baseline's interval; alpha split by Bonferroni over the metrics")


class MetricSpec(BaseModel):
    """One watched quantity: a mean of per-record observations in [0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    meaning: str
    binary: bool = True  # observations are 0/1 (a rate): its baseline interval is Clopper-Pearson
    evidence: tuple[str, ...] = ()  # the names this quantity has in a promotion scorecard, if any
    one_sided: bool = False  # alarm only above the baseline (a bound, not an estimate: out-of-support)
    exact: Optional[float] = None  # a baseline known without measuring it (an honest sidecar's calibration)
    unit: str = "records"


class Baseline(BaseModel):
    """What a metric is held to: the champion's value at promotion (or the reference window's) and its interval
    at the metric's half share of alpha."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    value: float
    low: float
    high: float
    n: int = 0
    source: str  # where it comes from, in words (the ledger entry, the manifest's scorecard, the reference window)


class SeriesPoint(BaseModel):
    """The metric after `n` live records: its running mean and confidence sequence."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    n: int
    at: str  # the time of the last record counted (the log's own timestamp when it has one)
    mean: float
    low: float
    high: float


class Alarm(BaseModel):
    """A metric whose live confidence sequence left its baseline's interval."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    metric: str
    loop: LoopKind
    direction: Literal["above", "below"]
    baseline: Baseline
    started_n: int  # the live record at which the sequence first left the baseline
    started_at: str  # that record's time
    started_record: str  # that record, as file:line and its ids
    mean: float  # now
    low: float
    high: float
    n: int
    first_record: str  # the first live record the sequence counts
    last_record: str
    alpha: float  # this metric's share of the budget
    method: str = METHOD
    meaning: str = ""
    advice: str = ""
    delivered: bool = False  # the webhook payload that carried it was handed to a sender

    def line(self) -> str:
        """One line for the terminal."""
        return (f"ALARM {self.metric}: {self.mean:.4f} [{self.low:.4f}, {self.high:.4f}] over {self.n} records is "
                f"{self.direction} the baseline {self.baseline.value:.4f} [{self.baseline.low:.4f}, "
                f"{self.baseline.high:.4f}] ({self.baseline.source}); since record {self.started_n} "
                f"({self.started_at}, {self.started_record})")


class MetricState(BaseModel):
    """The running statistics of one metric, stored between runs."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    n: int = 0
    total: float = 0.0
    v: float = 0.0
    reference_n: int = 0  # observations taken into the reference window (when the baseline comes from it)
    reference_total: float = 0.0
    reference_batches: list[float] = Field(default_factory=list)  # sums of consecutive batches (batch means)
    baseline: Optional[Baseline] = None
    alarm: Optional[Alarm] = None
    series: list[SeriesPoint] = Field(default_factory=list)
    first_record: str = ""
    last_record: str = ""


class FileCursor(BaseModel):
    """How far a log was read: its identity (inode, the hash of its first bytes) and the offset after the last
    complete line counted. A log whose inode changed, that got shorter, or whose first bytes differ was rotated,
    truncated or replaced: it is read again from its start, and its records are counted only if new."""

    model_config = ConfigDict(extra="forbid")

    path: str
    inode: int = 0
    offset: int = 0
    lines: int = 0  # complete lines read so far (line numbers in alarms and quarantine)
    head: str = ""  # sha256 of the first HEAD_BYTES bytes (fewer while the file is shorter)
    head_len: int = 0
    resets: int = 0


class Quarantined(BaseModel):
    """A line the monitor could not read: where, which field, why."""

    model_config = ConfigDict(extra="forbid")

    file: str
    line: int
    field: str
    error: str


class MonitorState(BaseModel):
    """Everything one monitor (one set of logs, one champion) keeps between runs."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    version: int = STATE_VERSION
    loop: LoopKind
    logs: str
    module: str
    module_digest: str = ""
    alpha: float = DEFAULT_ALPHA
    reference: int = 0
    runs: int = 0
    records: int = 0
    cursors: dict[str, FileCursor] = Field(default_factory=dict)
    metrics: dict[str, MetricState] = Field(default_factory=dict)
    seen: list[str] = Field(default_factory=list)  # keys of records counted (a reread log never counts one twice)
    pending: dict[str, Any] = Field(default_factory=dict)  # loop-specific memory: turns awaiting labels, histories
    counts: dict[str, int] = Field(default_factory=dict)  # records, duplicates, quarantined ... (never dropped)
    quarantine: list[Quarantined] = Field(default_factory=list)  # the latest few; counts hold them all
    support: Optional[dict[str, Any]] = None  # the out-of-support test's training support
    mlflow_run_id: Optional[str] = None
    updated_at: str = ""
