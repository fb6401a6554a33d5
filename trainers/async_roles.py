"""`mode=async`'s rollout worker and what every Ray actor of a run is built from: a `RunSpec` (the
run's typed `Job` and the servers' endpoints), so a worker reaches the servers over HTTP and may run on
any node that has what its env needs. The judge and the trainer are the roles mode=train uses too
(trainers/roles.py, built here by their `from_spec`)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from agents.base import ModelAgent
from agents.pool import EnvPool
from agents.rollout import run_episode
from agents.serving.http_policy import Endpoints
from trainers.curriculum import max_steps_at
from trainers.job import Job
from trainers.setup import rollout_sampling, split_tasks


def group_task(seed: int, tasks: list, group_no: int):
    """Group n's task: a seeded draw, so a resumed run continues the same schedule (a string seed:
    `hash()` of a str differs between processes)."""
    rng = random.Random(f"group {seed} {group_no}")
    return tasks[rng.randrange(len(tasks))]


@dataclass(frozen=True)
class RunSpec:
    """What every role is built from; plain and picklable."""
    job: Job  # the run's typed config
    run_dir: str
    policy: Endpoints
    frozen: Endpoints | None
    judge_server: Endpoints | None = None  # a trained `judge.model`'s own server
    with_env: bool = True  # mode=proxy has none: its steps come from live sessions
    driver_pid: int = 0  # the run's own process (what a user signals to stop it)

    def parts(self):
        return self.job, self.job.mode, Path(self.run_dir)


class Rollout:
    """A rollout worker: its own env pool and policy client; one group of episodes per call."""

    def __init__(self, spec: RunSpec):
        from envs.make import env_maker

        self.job, self.tc, run_dir = spec.parts()
        make_env, self.env_cfg = env_maker(self.job.env, self.job.sandbox, run_dir, split=None)
        self.pool = EnvPool(make_env)
        self.train_tasks, _ = split_tasks(self.job, self.pool.get().unwrapped)
        self.policy = spec.policy.connect()
        self.sampling = rollout_sampling(self.job.model, self.tc)

    def produce(self, group_no: int, gate):
        seed, tc = self.job.seed, self.tc
        task, trajs, version = group_task(seed, self.train_tasks, group_no), [], None
        for k in range(tc.group_size):
            v = gate.wait_open()
            version = v if version is None else version  # versions only grow: the first is the oldest
            self.pool.set_max_steps(max_steps_at(v, tc.iterations, tc.max_steps_start, self.env_cfg.max_steps))
            agent = ModelAgent(self.policy, self.sampling, seed=hash((seed, group_no, k)) % 2**31)
            trajs.append(run_episode(self.pool.get(), agent, task, self.env_cfg.system_prompt, seed=seed))
        return version, trajs

    def close(self) -> None:
        from envs.sandbox import wait_for_background_removals

        self.pool.close()
        wait_for_background_removals()
