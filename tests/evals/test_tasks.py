"""The cluster code paths without a cluster: with a map installed (`evals.tasks.using`), replay, the post-mortem's
resamples and the off-policy bootstrap cut their work into tasks; the results are the one-process loops', exactly.
(tests/guidebench/cluster/ runs the same paths on a real Dask cluster.)"""

from __future__ import annotations

import numpy as np

import programs
from evals import tasks
from evals.offpolicy._base import episode_bootstrap
from evals.postmortem import post_mortem
from evals.replay import TASK_RECORDS, replay
from replay_support import hand_made_lines, records_of


def _mapped(calls: list[int]):
    """A map in this process that counts its tasks (what a cluster's map returns, in order)."""
    def mapper(fn, items):
        calls.append(len(items))
        return [fn(item) for item in items]
    return mapper


def _without_latency(rows):
    return [{key: value for key, value in row.items() if key != "latency_s"} for row in rows]


def test_replay_and_postmortem_as_tasks_are_the_loops_results() -> None:
    records = records_of(hand_made_lines() * 400)  # more than one chunk of TASK_RECORDS
    assert len(records) > TASK_RECORDS
    one = replay(programs.spec("full_auto.rules").build(), records, progress=False, n_resamples=100)
    calls: list[int] = []
    with tasks.using(_mapped(calls)):
        assert tasks.distributed()
        split = replay(programs.spec("full_auto.rules").build(), records, progress=False, n_resamples=100)
        pm_split = post_mortem("full_auto", split.rows, n_resamples=100, permutations=100)
    assert not tasks.distributed()
    assert calls and calls[0] == -(-len(records) // TASK_RECORDS)  # the replay's chunks, then the resamples'
    assert _without_latency(split.rows) == _without_latency(one.rows)
    assert {k: v for k, v in split.metrics_dict().items() if "latency" not in k} == \
        {k: v for k, v in one.metrics_dict().items() if "latency" not in k}
    pm_one = post_mortem("full_auto", split.rows, n_resamples=100, permutations=100)
    assert pm_split.model_dump_json() == pm_one.model_dump_json()


def test_episode_bootstrap_in_blocks_is_the_whole_bootstrap() -> None:
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(40), 5)
    columns = {"x": rng.normal(size=200), "w": rng.uniform(size=200)}
    combine = lambda sums: sums["x"] / sums["w"]  # noqa: E731
    whole = episode_bootstrap(columns, groups, combine, resamples=1000, seed=7)
    calls: list[int] = []
    with tasks.using(_mapped(calls)):
        blocks = episode_bootstrap(columns, groups, combine, resamples=1000, seed=7)
    assert calls == [4] and blocks == whole


def test_episode_resamples_as_tasks_are_the_loops_draws() -> None:
    """A planner post-mortem draws whole episodes (`units`): its cluster chunks redraw the same episodes."""
    from evals.slice_tests import mean_intervals

    rng = np.random.default_rng(5)
    n = 3000
    units = np.repeat(np.arange(60), n // 60)
    columns = {"x": rng.normal(size=n) + units * 0.01}
    entries = {"all": ("x", np.ones(n, dtype=bool)), "half": ("x", units < 30)}
    whole = mean_intervals(columns, entries, n, n_resamples=400, seed=11, units=units)
    by_record = mean_intervals(columns, entries, n, n_resamples=400, seed=11)
    calls: list[int] = []
    with tasks.using(_mapped(calls)):
        chunked = mean_intervals(columns, entries, n, n_resamples=400, seed=11, units=units)
    assert calls and chunked == whole
    assert whole["all"] != by_record["all"]  # the episodes, not the records, were drawn
