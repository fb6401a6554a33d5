"""The judge and the trainer of a training run, one class each whichever loop schedules them:
mode=train builds both in its own process and calls them in turn (trainers/sync.py); mode=async and
mode=proxy build each in its own Ray actor from a `RunSpec` (`from_spec`, trainers/async_roles.py)
and call them at once (trainers/ray_loops.py)."""
from __future__ import annotations

from pathlib import Path

import torch

from trainers.checkpoint import load_checkpoint, save_checkpoint, save_weights
from trainers.job import Job
from trainers.judged import judged_counts, judged_samples, step_feedback
from trainers.lr_schedule import lr_at
from trainers.setup import init_path_of, load_trainer
from trainers.update import ppo_update


class Judge:
    """Votes, hints and teacher logprobs for a group's steps, then the signal's samples. The oracles
    read the reference solutions of `env`'s tasks; `tools` are the tools each task's prompt offers."""

    def __init__(self, job: Job, env, tools: dict, policy, frozen, judge_server=None, *, owned_env=None):
        tc = job.mode
        self.feedback = step_feedback(job, env, frozen, policy, tools, teacher=tc.teacher, kl_coef=tc.kl_coef,
                                      judge_server=judge_server, train_stop_token=tc.train_stop_token)
        self.owned_env = owned_env  # closed with the judge (an actor's own env)

    @classmethod
    def from_spec(cls, spec) -> Judge:
        """A judge in a Ray actor: its own env (for the oracles' references and the tools) and clients
        of the run's servers."""
        env = None
        if spec.with_env:
            from envs.make import env_maker

            make_env, _ = env_maker(spec.job.env, spec.job.sandbox, Path(spec.run_dir), split=None)
            env = make_env()
        tools = {t.task_id: env.unwrapped.tools_for(t) for t in env.unwrapped.tasks} if env else {}
        return cls(spec.job, env and env.unwrapped, tools, spec.policy.connect(),
                   spec.frozen.connect() if spec.frozen else None,
                   spec.judge_server.connect() if spec.judge_server else None, owned_env=env)

    def judge(self, group_no: int, trajs) -> tuple[list, dict]:
        """(the signal's samples, what the group adds to the run's totals and its log line)."""
        samples, steps, info = judged_samples(trajs, group_no, self.feedback)
        return samples, judged_counts(trajs, steps, info)

    def close(self) -> None:
        if self.owned_env is not None:
            self.owned_env.close()


class Trainer:
    """The model and its optimizer, from the run's checkpoint when there is one (a resumed run, or a
    trainer actor restarted by Ray), whose weights it then serves again. `policy` is what serves
    the rollouts: `publish` hands it the new weights."""

    def __init__(self, job: Job, run_dir: Path, policy):
        self.job, self.tc, self.run_dir, self.policy = job, job.mode, run_dir, policy
        self.model, self.optimizer = load_trainer(job, init_path_of(job))
        self.saved = load_checkpoint(self.run_dir / "checkpoint", self.model, self.optimizer)  # the run's state
        if self.saved is not None:
            self.publish()

    @classmethod
    def from_spec(cls, spec) -> Trainer:
        return cls(spec.job, Path(spec.run_dir), spec.policy.connect())

    def update(self, samples, version: int) -> dict:
        """One PPO update to `version` (the servers still serve the previous one)."""
        tc = self.tc
        return ppo_update(self.model, self.optimizer, samples, tc,
                          generator=torch.Generator().manual_seed(hash((self.job.seed, version - 1)) % 2**31),
                          lr=lr_at(tc.lr, tc.lr_schedule, version - 1, tc.iterations, tc.lr_min_ratio))

    def publish(self) -> None:
        """The weights to every serving endpoint."""
        self.policy.update_weights_from_disk(str(save_weights(self.model, self.run_dir / "weights")))

    def save(self, state: dict) -> None:
        save_checkpoint(self.run_dir / "checkpoint", self.model, self.optimizer, state)
