"""`guidebench monitor` end to end: exit codes, alarms that name what they saw, the webhook against a local HTTP
server, MLflow metrics on the champion's registered model, `--every` stopped by Ctrl-C, the page in Chromium, and the
planner's watched quantities (a sidecar that lies)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from frozen_support import export_program
from guidebench.cli import main
from guidebench.data.fullauto_writer import write_workspace
from guidebench.monitor import sinks
from guidebench.monitor.run import run_pass
from guidebench.simulators.experiments import simulate_episode
from guidebench.simulators.fullauto import FullAutoSimulator, SimRun
from runtime.advisor import FAMILIES
from runtime.fullauto import GuardrailConfig

ROOT = Path(__file__).resolve().parents[3]
TIGHT = GuardrailConfig(min_confidence=0.85, max_turns=200, no_progress_limit=2)


def tightened(seed: int, n: int):
    """Sessions played under a tightened guardrail config (the planted change)."""
    simulator = FullAutoSimulator(seed)
    for index in range(n):
        episode = simulator.episode(index)
        episode.guardrails = TIGHT
        episode.run_file = episode.run_file.model_copy(update={"min_confidence": TIGHT.min_confidence,
                                                               "no_progress_limit": TIGHT.no_progress_limit})
        while not episode.done:
            episode.step(episode.deployed_decision())
        yield SimRun(episode.run_file, episode.decision_lines, episode.raw_lines, episode.events, episode.labels)


def append(target: Path, source: Path) -> None:
    for name in ("fullauto-decisions.jsonl", "fullauto-decisions-raw.jsonl", "labels.jsonl"):
        with open(target / name, "ab") as out:
            out.write((source / name).read_bytes())
    for file in (source / "runs").iterdir():
        shutil.copy(file, target / "runs" / file.name)


class Hook(BaseHTTPRequestHandler):
    """Answers 503 to the first POST, 200 after: the sender must retry."""

    received: list = []
    calls = 0

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls += 1
        if type(self).calls == 1:
            self.send_response(503)
        else:
            type(self).received.append(json.loads(body))
            self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    server = HTTPServer(("127.0.0.1", 0), Hook)
    Hook.received, Hook.calls = [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alarms"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("monitor")
    champion = export_program("full_auto.rules", root / "ex", name="watched").path
    write_workspace(root / "normal", FullAutoSimulator(5).runs(70), progress=False)
    write_workspace(root / "tight", tightened(6, 70), progress=False)
    return {"root": root, "ex": champion}


@pytest.mark.slow
def test_quiet_then_alarm_then_webhook_mlflow_and_exit_codes(world, hook, tmp_path, monkeypatch, capsys):
    from optimizer_support import tracking_uri

    home = tmp_path / "home"
    monkeypatch.setenv("GUIDEBENCH_HOME", str(home))
    uri = tracking_uri(tmp_path)
    from guidebench.release.model_registry import ModuleRegistry
    from guidebench.release.promotion import folder_digest

    registry = ModuleRegistry(uri)  # the champion registered as promotion registers it
    run_id, source = registry.log_attempt(run_name="promote watched", params={}, metrics={}, tags={})
    version = registry.register("watched", source=source, run_id=run_id, package="watched@0.1.0",
                                digest=folder_digest(world["ex"]), tags={}).version
    logs = tmp_path / "logs"
    shutil.copytree(world["root"] / "normal", logs)
    args = ["monitor", str(logs), "--module", str(world["ex"]), "--reference", "200", "--webhook", hook,
            "--mlflow", "--tracking-uri", uri, "--html", str(tmp_path / "page")]
    assert main(args) == 0
    quiet = capsys.readouterr().out
    assert "override_rate" in quiet and "ALARM" not in quiet
    append(logs, world["root"] / "tight")
    assert main(args) == 1
    out = capsys.readouterr().out
    alarm = next(line for line in out.splitlines() if line.startswith("ALARM override_rate"))
    assert re.search(r"over \d+ records is above the baseline [\d.]+ \[[\d.]+, [\d.]+\] \(the reference window", alarm)
    assert re.search(r"since record \d+ \(\S+, \./fullauto-decisions\.jsonl:\d+\)", alarm)
    assert main(args) == 1  # the alarm stays in force
    deadline = time.monotonic() + 60
    while not Hook.received and time.monotonic() < deadline:
        time.sleep(0.2)
    assert Hook.calls >= 2 and len(Hook.received) == 1  # retried after the 503, delivered once
    sent = Hook.received[0]
    assert sent["module"] == "watched@0.1.0" and "override_rate" in {a["metric"] for a in sent["alarms"]}
    first = next(a for a in sent["alarms"] if a["metric"] == "override_rate")
    assert {"baseline", "low", "high", "started_n", "started_record", "first_record", "last_record"} <= set(first)
    import mlflow

    state = json.loads(next((home / "monitor").glob("full_auto-*.json")).read_text())
    client = mlflow.tracking.MlflowClient(uri)
    history = client.get_metric_history(state["mlflow_run_id"], "monitor.override_rate.high")
    assert len(history) >= 2 and [m.step for m in history] == sorted(m.step for m in history)
    tags = client.get_run(state["mlflow_run_id"]).data.tags
    assert tags["guidebench.module"] == "watched@0.1.0" and tags["guidebench.registered_version"] == version
    assert "override_rate" in client.get_model_version("watched", version).tags["monitor_alarms"]
    assert (tmp_path / "page" / "monitor.html").is_file()
    assert main(["monitor", str(tmp_path / "nowhere"), "--module", str(world["ex"])]) == 2


def test_a_webhook_nobody_answers_gives_up_in_bounded_time_and_is_reported(tmp_path):
    sender = sinks.send_webhook("http://127.0.0.1:9/never", {"alarms": []}, tmp_path / "outbox", seconds=2)
    try:
        assert sender.wait(timeout=60) == 1
    finally:
        sender.kill()
    assert len(sinks.failed_deliveries(tmp_path / "outbox")) == 1
    assert "gave up after 2 s" in (tmp_path / "outbox" / "webhook.log").read_text()


def test_every_stops_cleanly_on_ctrl_c(world, tmp_path):
    env = {**os.environ, "GUIDEBENCH_HOME": str(tmp_path / "home"), "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-m", "guidebench.cli", "monitor", str(world["root"] / "normal"),
                              "--module", str(world["ex"]), "--every", "1s", "--reference", "200"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert "new records" in child.stdout.readline()  # the first pass ran
        time.sleep(1.5)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 130 and "Traceback" not in err and "monitor stopped" in err
    again = run_pass(world["root"] / "normal", None, home=tmp_path / "home", state_file=next(
        (tmp_path / "home" / "monitor").glob("full_auto-*.json")))
    assert again.records == 0  # every pass it finished was saved


def test_planner_loop_a_lying_sidecar_alarms(tmp_path):
    folder = tmp_path / "repo" / "experiments"
    folder.mkdir(parents=True)
    lines, side, iteration = [], [], 0
    for index in range(40):
        for entry in simulate_episode(9, index).entries:
            iteration += 1
            lines.append(json.dumps({**entry, "iteration_id": iteration}, sort_keys=True))
            tried = entry["strategy_tags"][0]
            if tried not in FAMILIES:
                continue
            # states a 0.6 chance for the family it calls greedy, yet the loop always tries that family
            probabilities = {f: (0.6 if f == tried else 0.2) for f in FAMILIES}
            side.append(json.dumps({"schema_version": 1, "timestamp": "2025-03-03T08:00:00Z",
                                    "iteration_id": iteration, "packet_hash": f"{iteration:064x}",
                                    "probabilities": probabilities, "family": tried, "greedy_family": tried}))
    (folder / "log.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "planner-decisions.jsonl").write_text("\n".join(side) + "\n")
    result = run_pass(tmp_path / "repo", None, reference=150, home=tmp_path / "home")
    assert result.state.loop == "planner"
    alarm = result.state.metrics["sidecar_calibration"].alarm
    assert alarm is not None and alarm.direction == "above" and alarm.baseline.value == 0.5
    assert result.state.metrics["pivot_compliance"].n > 0 and result.state.counts["sidecar_lines_joined"] > 1000


@pytest.mark.slow
def test_page_renders_in_headless_chromium(world, tmp_path):
    done = subprocess.run(["bash", str(ROOT / "tests" / "setup" / "ensure_chromium.sh")], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    chromium = done.stdout.strip().splitlines()[-1]
    logs = tmp_path / "logs"
    shutil.copytree(world["root"] / "normal", logs)
    first = run_pass(logs, None, reference=200, home=tmp_path / "home")
    append(logs, world["root"] / "tight")
    result = run_pass(logs, None, reference=200, home=tmp_path / "home", state_file=first.path)
    from guidebench.monitor.report import write_html

    page = write_html(result.state, tmp_path / "page", "watched@0.1.0")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", "<script>window.addEventListener('load',()=>{document.body."
                     "setAttribute('data-images',Array.from(document.images).map(i=>i.naturalWidth+'x'+"
                     "i.naturalHeight).join(','))});</script></body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert re.search(r'data-images="[1-9]\d*x[1-9]\d*"', dom.stdout)
    assert 'id="alarms-table"' in dom.stdout and "override_rate" in dom.stdout
    rows = re.findall(r"<tr>", dom.stdout.split('id="metrics-table"')[1].split("</table>")[0])
    assert len(rows) == len(result.state.metrics) + 1
