"""The parts of `mode=async` as the Ray loops' roles (trainers/ray_loops.py): each is built in its
own actor process from a `RunSpec` (the run's typed `Job` and the servers' endpoints) and
reaches the servers over HTTP, so a worker may run on any node that has what its env needs."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from agents.base import ModelAgent
from agents.pool import EnvPool
from agents.rollout import run_episode
from agents.serving.http_policy import Endpoints
from trainers.checkpoint import load_checkpoint, save_checkpoint, save_weights
from trainers.curriculum import max_steps_at
from trainers.job import Job
from trainers.judged import judged_counts, judged_samples, step_feedback
from trainers.lr_schedule import lr_at
from trainers.setup import init_path_of, load_trainer, rollout_sampling, split_tasks
from trainers.update import ppo_update


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


class Judge:
    """A judge: votes, hints and teacher logprobs for a group's steps, then the signal's samples."""

    def __init__(self, spec: RunSpec):
        job, tc, run_dir = spec.parts()
        self.env = None
        tools = {}
        if spec.with_env:
            from envs.make import env_maker

            make_env, _ = env_maker(job.env, job.sandbox, run_dir, split=None)
            self.env = make_env()
            env = self.env.unwrapped
            tools = {t.task_id: env.tools_for(t) for t in env.tasks}
        policy = spec.policy.connect()
        frozen = spec.frozen.connect() if spec.frozen else None
        judge_server = spec.judge_server.connect() if spec.judge_server else None
        self.feedback = step_feedback(job, self.env and self.env.unwrapped, frozen, policy, tools,
                                    teacher=tc.teacher, kl_coef=tc.kl_coef, judge_server=judge_server)

    def judge(self, group_no: int, trajs):
        samples, steps, info = judged_samples(trajs, group_no, self.feedback)
        return samples, judged_counts(trajs, steps, info)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()


class Trainer:
    """The trainer: the model and optimizer, from the run's checkpoint when there is one (a resumed
    run, or this actor restarted by Ray), whose weights it then serves again."""

    def __init__(self, spec: RunSpec):
        self.job, self.tc, self.run_dir = spec.parts()
        self.model, self.optimizer = load_trainer(self.job, init_path_of(self.job))
        self.policy = spec.policy.connect()
        if load_checkpoint(self.run_dir / "checkpoint", self.model, self.optimizer) is not None:
            self.publish()

    def update(self, samples, version: int) -> dict:
        """One PPO update to `version` (the servers still serve the previous one)."""
        import torch

        tc = self.tc
        return ppo_update(self.model, self.optimizer, samples, tc,
                          generator=torch.Generator().manual_seed(hash((self.job.seed, version - 1)) % 2**31),
                          lr=lr_at(tc.lr, tc.lr_schedule, version - 1, tc.iterations, tc.lr_min_ratio))

    def publish(self) -> None:
        """The weights to every serving endpoint."""
        self.policy.update_weights_from_disk(str(save_weights(self.model, self.run_dir / "weights")))

    def save(self, state: dict) -> None:
        save_checkpoint(self.run_dir / "checkpoint", self.model, self.optimizer, state)
