"""Where alarms go besides the exit code: a webhook (JSON POST, retried with backoff by a separate process so the
next run never waits for it) and MLflow (each metric's series on a run tagged with the champion's registered
model version, plus tags on that version).

Run as `python -m guidebench.monitor.sinks URL FILE SECONDS`, this module is the webhook sender: it POSTs FILE's
JSON until a 2xx answer or SECONDS have passed (backoff 0.5 s, doubling, at most 30 s), then deletes FILE; if every
attempt failed it renames FILE to *.failed and says why in `webhook.log` beside it (the next run reports it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

from guidebench.monitor._base import Alarm, MonitorState

OUTBOX = "outbox"
WEBHOOK_SECONDS = 120.0
EXPERIMENT = "guidebench-monitor"


def payload(state: MonitorState, alarms: Sequence[Alarm], champion: str) -> dict[str, Any]:
    """The webhook's JSON body: every new alarm with its metric, baseline, interval, start and records."""
    return {"event": "guidebench.monitor.alarm", "loop": state.loop, "logs": state.logs, "module": champion,
            "module_digest": state.module_digest, "alpha": state.alpha, "records": state.records,
            "sent_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "alarms": [a.model_dump(mode="json") for a in alarms]}


def send_webhook(url: str, body: dict[str, Any], outbox: Path, seconds: float = WEBHOOK_SECONDS) -> subprocess.Popen:
    """Write the body to the outbox and start a detached sender; returns at once with the sender's process."""
    outbox.mkdir(parents=True, exist_ok=True)
    file = outbox / f"alarm-{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}-{os.getpid()}.json"
    temp = file.with_suffix(".tmp")
    temp.write_text(json.dumps(body), encoding="utf-8")
    os.replace(temp, file)
    return subprocess.Popen([sys.executable, "-m", "guidebench.monitor.sinks", url, str(file), str(seconds)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def failed_deliveries(outbox: Path) -> list[Path]:
    """Payloads every attempt failed to deliver."""
    return sorted(outbox.glob("*.failed")) if outbox.is_dir() else []


def deliver(url: str, file: Path, seconds: float) -> bool:
    """POST the file's JSON until a 2xx or the time is up (see the module)."""
    data = file.read_bytes()
    deadline, wait, error = time.monotonic() + seconds, 0.5, ""
    while True:
        left = deadline - time.monotonic()
        request = urllib.request.Request(url, data=data, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "User-Agent": "guidebench-monitor"})
        try:
            with urllib.request.urlopen(request, timeout=max(min(10.0, left), 0.5)) as answer:
                if 200 <= answer.status < 300:
                    file.unlink(missing_ok=True)
                    return True
                error = f"HTTP {answer.status}"
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            error = str(getattr(exc, "reason", exc))
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(wait, left))
        wait = min(wait * 2, 30.0)
    file.replace(file.with_suffix(".failed"))
    with open(file.parent / "webhook.log", "a", encoding="utf-8") as log:
        log.write(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} {file.name} to {url}: gave up "
                  f"after {seconds:g} s: {error}\n")
    return False


def log_mlflow(state: MonitorState, champion: Any, tracking_uri: Optional[str] = None) -> Optional[str]:
    """Log each metric's new series points (step = its live records) on the monitor's MLflow run, tagged with the
    champion's registered model version; tag that version with the alarms in force. Returns the run id."""
    import mlflow
    from mlflow.entities import Metric

    from guidebench.release.model_registry import ModuleRegistry

    registry = ModuleRegistry(tracking_uri)
    client = registry.client
    registered = registry.find(champion.name, champion.digest) if champion is not None and champion.digest else None
    if state.mlflow_run_id is None:
        found = mlflow.get_experiment_by_name(EXPERIMENT)
        experiment = found.experiment_id if found else client.create_experiment(EXPERIMENT)
        tags = {"guidebench.monitor.logs": state.logs, "guidebench.monitor.loop": state.loop,
                "guidebench.module": champion.package if champion else "", "guidebench.module_digest":
                state.module_digest}
        if registered is not None:
            tags.update({"guidebench.registered_model": registered.name,
                         "guidebench.registered_version": registered.version})
        run = client.create_run(experiment, run_name=f"monitor {champion.package if champion else state.loop}",
                                tags=tags)
        state.mlflow_run_id = run.info.run_id
    logged = state.pending.setdefault("mlflow_logged", {})
    now = int(time.time() * 1000)
    batch = []
    for name, metric in state.metrics.items():
        for point in metric.series:
            if point.n <= logged.get(name, 0):
                continue
            for part in ("mean", "low", "high"):
                batch.append(Metric(f"monitor.{name}.{part}", getattr(point, part), now, point.n))
        if metric.series:
            logged[name] = metric.series[-1].n
    alarms = sorted(name for name, m in state.metrics.items() if m.alarm is not None)
    batch.append(Metric("monitor.alarms", float(len(alarms)), now, state.runs))
    for start in range(0, len(batch), 900):
        client.log_batch(state.mlflow_run_id, metrics=batch[start:start + 900])
    if registered is not None:
        client.set_model_version_tag(registered.name, registered.version, "monitor_alarms", ",".join(alarms) or "none")
        client.set_model_version_tag(registered.name, registered.version, "monitor_run_id", state.mlflow_run_id)
    return state.mlflow_run_id


if __name__ == "__main__":
    ok = deliver(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]))
    sys.exit(0 if ok else 1)
