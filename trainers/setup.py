"""What every training mode starts from (`start_run`): the envs and tasks, the servers (the policy; a
frozen one on the initial weights for the judge, the hints, the frozen teacher and the KL reference; a
trained `judge.model` gets a server of its own) and the run's state, loaded from its checkpoint or fresh
after the evaluation before training (`Run.begin`). The judge and the trainer are roles
(trainers/roles.py); the loops (trainers/sync.py, trainers/async_train.py, trainers/proxy/run.py)
differ only in how they schedule them."""
from __future__ import annotations

import dataclasses
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import torch

from agents.base import ModelAgent
from agents.factory import model_path, serve_policy
from agents.pool import EnvPool, run_episodes, summarize
from agents.serving.http_policy import HTTPPolicy
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker
from envs.sandbox import wait_for_background_removals
from nextstate.atomic import read_jsonl, write_jsonl_atomic
from nextstate.config import EnvConfig, ModelConfig, check_ranges
from nextstate.types import Task
from trainers.cpu_time import cpu_seconds
from trainers.curriculum import filter_tasks, without_tags
from trainers.eval_cache import EvalCache
from trainers.feedback.model_judge import HintConfig, JudgeConfig, NextStateHintConfig
from trainers.feedback.oracle_judge import GivenHintConfig, OracleJudgeConfig
from trainers.feedback.registry import HINTERS, JUDGES, choose
from trainers.infra_guard import require_some_ran
from trainers.job import Job
from trainers.lr_schedule import SCHEDULES
from trainers.run_state import RunState
from trainers.signals import SignalConfig
from trainers.update import UpdateConfig


@dataclass
class TrainConfig(UpdateConfig):
    """conf/mode/train.yaml: the update's keys (UpdateConfig: lr, epochs, clipping, ...) and the loop's."""

    name: str
    iterations: int
    tasks_per_iter: int
    group_size: int
    eval_limit: int | None
    eval_every: int
    teacher: str
    lora: bool
    lora_r: int
    lora_alpha: int
    gradient_checkpointing: str
    max_steps_start: int | None
    difficulties: list[str] | None
    tags: list[str] | None
    keep_checkpoint: bool
    train_stop_token: bool  # the token that ends a reply is in its loss (false: left out; SFT always trains it)
    threads: int | None



def check_training_ranges(tc: TrainConfig, judge: JudgeConfig | OracleJudgeConfig,
                          hints: HintConfig | NextStateHintConfig | GivenHintConfig) -> None:
    """Numbers that would train nothing, or break the update (a zero temperature divides the logits),
    stop the run before its servers and its first evaluation start."""
    check_ranges("mode", tc, at_least={"iterations": 0, "tasks_per_iter": 1, "group_size": 1, "eval_limit": 1,
                                       "eval_every": 0, "epochs": 1, "minibatch_size": 1, "lora_r": 1,
                                       "weight_decay": 0, "eps_low": 0, "eps_high": 0, "kl_coef": 0,
                                       "max_steps_start": 1, "threads": 1, "lr_warmup_steps": 0},
                 above={"rollout_temperature": 0, "lr": 0, "grad_clip": 0})
    if tc.lr_schedule not in SCHEDULES:
        raise SystemExit(f"mode.lr_schedule={tc.lr_schedule}: must be one of {', '.join(SCHEDULES)}")
    if not 0 <= tc.lr_min_ratio <= 1:
        raise SystemExit(f"mode.lr_min_ratio={tc.lr_min_ratio}: must be between 0 and 1")
    if hasattr(tc, "batch_samples"):  # mode=async and mode=proxy
        check_ranges("mode", tc, at_least={"batch_samples": 1, "max_staleness": 0, "judge_workers": 1})
    check_ranges("judge", judge, at_least={"m": 1})
    if isinstance(judge, JudgeConfig):  # the oracle judge reads labels: no votes to sample
        check_ranges("judge", judge, at_least={"max_new_tokens": 1, "temperature": 0})
    if isinstance(hints, HintConfig):
        check_ranges("hints", hints, at_least={"m": 1, "max_new_tokens": 1, "temperature": 0, "min_chars": 0})
    if isinstance(hints, NextStateHintConfig):
        check_ranges("hints", hints, at_least={"min_chars": 0})


def load_trainable(path: Path, tc: TrainConfig, dtype: str):
    from transformers import AutoModelForCausalLM

    gpu = torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    if gpu:
        model = model.cuda()
    if tc.gradient_checkpointing == "on" or (tc.gradient_checkpointing == "auto" and gpu):
        model.gradient_checkpointing_enable()
    if tc.lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=tc.lora_r, lora_alpha=tc.lora_alpha, lora_dropout=0.0,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    return model


def evaluate_policy(pool, policy, sampling, tasks, system_prompt, seed, parallel, progress, desc,
                    out_file: Path) -> dict:
    """The policy on `tasks`, its episodes written to `out_file` whole, summarized; a run stops here when
    none of them ran (require_some_ran). Shared by mode=train and mode=sft."""
    trajs = run_episodes(pool, lambda i: ModelAgent(policy, sampling), tasks, system_prompt=system_prompt, seed=seed,
                         parallel=parallel, progress=progress, desc=desc)
    write_evaluation(out_file, trajs)
    require_some_ran(trajs, f"the evaluation ({desc})")
    return summarize(trajs)


def write_evaluation(out_file: Path, trajs) -> None:
    """The evaluation's episodes, written whole: a resumed run that redoes an evaluation (stopped after it,
    before its checkpoint) replaces the file instead of adding a second reading to it."""
    write_jsonl_atomic(out_file, (t.to_dict() for t in trajs))


def forget_after(log_file: Path, iteration: int) -> None:
    """Drop the log lines of iterations after the checkpoint's: a run stopped after an update's log line
    but before its checkpoint redoes that update on resume, and the log keeps each iteration once."""
    rows = read_jsonl(log_file)
    kept = [r for r in rows if r.get("iteration", -1) <= iteration]
    if len(kept) < len(rows):
        write_jsonl_atomic(log_file, kept)


@dataclass
class Run:
    """A training run's driver side, built by `start_run`: its job, the envs and tasks (None without an
    env: mode=proxy's steps come from live sessions), the servers, the run's state and clocks. The work
    is the roles' (trainers/roles.py: the judge and the trainer), whichever loop schedules them."""
    job: Job
    run_dir: Path
    tasks: Tasks | None
    policy: HTTPPolicy  # serves rollouts (and the teacher when mode.teacher=policy)
    frozen: HTTPPolicy | None  # the initial weights: frozen teacher, KL reference (and judge, hints: below)
    judge_server: HTTPPolicy | None  # a `judge.model` checkpoint's own server; None: the judge asks `frozen`
    init_path: Path  # the weights training starts from
    t_start: float
    cpu_start: float
    state: RunState = field(default_factory=RunState)

    @property
    def state_file(self) -> Path:
        return self.run_dir / "checkpoint"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "train_log.jsonl"

    @property
    def env_cfg(self) -> EnvConfig | None:
        return self.tasks.env_cfg if self.tasks else None

    @property
    def test_tasks(self) -> list[Task]:
        return self.tasks.test if self.tasks else []

    @property
    def eval_sampling(self) -> SamplingConfig:
        """Evaluation decodes greedily."""
        model = self.job.model
        return SamplingConfig(model.max_new_tokens, 0.0, 1.0, model.max_prompt_tokens)

    def evaluate(self, desc: str, out_file: Path) -> dict:
        return evaluate_policy(self.tasks.pool, self.policy, self.eval_sampling, self.tasks.test,
                               self.env_cfg.system_prompt, self.job.seed, self.job.parallel, self.job.progress,
                               desc, out_file)

    def begin(self, saved: dict | None) -> RunState:
        """The run's state: the checkpoint's (`saved`), or fresh after the evaluation before training."""
        if saved is not None:
            self.state = RunState.from_dict(saved)
            forget_after(self.log_file, self.state.iteration)
            print(f"[train] resumed after iteration {self.state.iteration}")
        else:
            self.state = fresh_state(self)
        return self.state


def add_counts(st: RunState, counts: dict, n_samples: int) -> None:
    st.train_episodes += counts["episodes"]
    st.train_samples += n_samples
    st.tokens += counts["tokens"]
    st.judge_votes += counts["judge_votes"]
    st.hints_accepted += counts["hints_accepted"]
    st.step_scores += counts["step_scores"]
    st.judge_pairs += counts["judge_pairs"]


@dataclass
class Tasks:
    """The env side of a run: envs (one per worker), the train and test tasks, each task's tools."""
    env_cfg: EnvConfig
    pool: EnvPool
    env: gym.Env
    train: list[Task]
    test: list[Task]
    tools: dict[str, list[dict]]


def split_tasks(job: Job, env) -> tuple[list[Task], list[Task]]:
    """The env's train tasks (after the difficulty and tag filters) and test tasks (`eval_limit`)."""
    tc = job.mode
    suite = without_tags(env.tasks, job.exclude_tags)
    train = filter_tasks([t for t in suite if t.split == "train"], tc.difficulties, tc.tags)
    return train, [t for t in suite if t.split == "test"][: tc.eval_limit or None]


def open_tasks(job: Job, run_dir: Path, stack: ExitStack) -> Tasks:
    """The envs (closed by `stack`, containers included) and the filtered train and test tasks."""
    make_env, env_cfg = env_maker(job.env, job.sandbox, run_dir, split=None)
    pool = EnvPool(make_env)
    stack.callback(wait_for_background_removals)
    stack.callback(pool.close)
    env = pool.get().unwrapped
    train, test = split_tasks(job, env)
    if not train or not test:
        raise SystemExit(f"env {env_cfg.name} needs train tasks (after the difficulty/tag filter) and test tasks")
    if hasattr(env, "prepare"):
        env.prepare(train + test)
    return Tasks(env_cfg, pool, env, train, test, {t.task_id: env.tools_for(t) for t in env.tasks})


def fresh_state(run: Run) -> RunState:
    """A new run's state, after the evaluation before training (cached per sweep: greedy decoding of
    the same weights on the same tasks gives the same score)."""
    if run.tasks is None:
        return RunState()
    (run.run_dir / "eval_before.jsonl").unlink(missing_ok=True)  # a run killed before its first checkpoint
    cache = EvalCache(Path(run.job.paths.cache_dir) / "evals", run.init_path, run.env_cfg, run.test_tasks,
                      run.eval_sampling,
                      run.job.seed if getattr(run.tasks.env, "seed_shapes_episodes", True) else None)
    before = cache.get(episodes_to=run.run_dir / "eval_before.jsonl")
    if before is None:
        before = run.evaluate("eval before", run.run_dir / "eval_before.jsonl")
        cache.put(before, episodes=run.run_dir / "eval_before.jsonl")
    return RunState(success_before=before["success_rate"], curve=[[0, before["success_rate"]]])


def rollout_sampling(model_cfg: ModelConfig, tc: TrainConfig) -> SamplingConfig:
    """How training rollouts sample: the mode's temperature over the whole distribution (top_p 1: the
    PPO ratio compares whole-distribution logprobs)."""
    return SamplingConfig(model_cfg.max_new_tokens, tc.rollout_temperature, 1.0, model_cfg.max_prompt_tokens)


def load_trainer(job: Job, init_path: Path):
    """The trainable model and its optimizer, seeded."""
    tc = job.mode
    if tc.threads:  # parallel sweep jobs on a small machine: oversubscribed torch threads collapse
        torch.set_num_threads(tc.threads)
    torch.manual_seed(job.seed)
    model = load_trainable(init_path, tc, job.model.dtype)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=tc.lr,
                                  weight_decay=tc.weight_decay)
    return model, optimizer


def frozen_servers(signal: SignalConfig, judge_kind, hint_kind, tc, judge_model: str | None,
                   init_path: Path) -> tuple[Path | None, Path | None]:
    """The weights of the frozen servers a run needs: (the initial weights, for the frozen OPD teacher,
    the KL reference and a judge of the same weights; a `judge.model` checkpoint of its own, for the
    PRM votes and model hints). The roles share one server when the weights are the same. A `judge.model`
    checkpoint is never the OPD teacher or the KL reference: were it the only frozen server, a run with
    a trained judge would distil from the judge."""
    judge_needed = (signal.needs_judge and judge_kind.needs_model) or (signal.needs_hints and hint_kind.needs_model)
    init_needed = tc.kl_coef > 0 or (signal.needs_hints and tc.teacher == "frozen")
    judge_path = Path(judge_model) if judge_model else init_path
    if judge_path.resolve() == init_path.resolve():
        return (init_path if judge_needed or init_needed else None), None
    if judge_needed and not (judge_path / "config.json").is_file():
        raise SystemExit(f"judge.model={judge_model} is not a model dir (no config.json there); mode=sft_judge "
                         "writes one to <its run dir>/judge")
    return (init_path if init_needed else None), (judge_path if judge_needed else None)


def init_path_of(job: Job) -> Path:
    """The weights training starts from."""
    return Path(job.model.init_from or model_path(job.model, job.paths.cache_dir))


def start_run(job: Job, run_dir: Path, stack: ExitStack, *, with_env: bool = True) -> Run:
    """Envs and tasks and the servers (the policy; a frozen one for the judge, hints, frozen teacher and
    KL reference; a trained `judge.model`'s own), after every check that can stop the run before they
    start. Without an env (`mode=proxy`) there are no tasks and no evaluation. Everything started is
    closed by `stack`; the run's state comes with `Run.begin`."""
    t_start, cpu_start = time.monotonic(), cpu_seconds()
    tc, signal, model_cfg, backend = job.mode, job.signal, job.model, job.backend
    judge_kind, hint_kind = choose(JUDGES, "judge", job.judge.name), choose(HINTERS, "hints", job.hints.name)
    if tc.teacher not in ("frozen", "policy"):
        raise SystemExit(f"mode.teacher must be frozen or policy, not {tc.teacher!r}")
    check_training_ranges(tc, job.judge, job.hints)
    if model_cfg.top_p != 1.0:  # the update's logprobs are of the whole distribution, as the rollout's must be
        raise SystemExit(f"model.top_p={model_cfg.top_p}: training samples at top_p 1.0 (the PPO ratio compares "
                         "whole-distribution logprobs); set model.top_p=1.0")
    reads_labels = (signal.needs_judge and judge_kind.reads_labels) or (signal.needs_hints and hint_kind.reads_labels)
    if not with_env and reads_labels:
        raise SystemExit("judge=oracle and hints=oracle read a task's labels and reference; this mode has no tasks")

    init_path = init_path_of(job)
    judge_model = job.judge.model if judge_kind.needs_model else None  # a trained judge serves votes and hints
    init_weights, judge_weights = frozen_servers(signal, judge_kind, hint_kind, tc, judge_model, init_path)
    tasks = open_tasks(job, run_dir, stack) if with_env else None
    policy = stack.enter_context(serve_policy(model_cfg, backend, job.paths.cache_dir, path=init_path,
                                              log_path=run_dir / "server.log"))
    # launched here even where the policy's servers are attached: theirs change with every update
    own = dataclasses.replace(backend, url=None, servers=[], replicas=1)
    frozen = judge_server = None
    if init_weights:
        frozen = stack.enter_context(serve_policy(model_cfg, own, job.paths.cache_dir, path=init_weights,
                                                  log_path=run_dir / "frozen_server.log"))
    if judge_weights:
        judge_server = stack.enter_context(serve_policy(model_cfg, own, job.paths.cache_dir, path=judge_weights,
                                                        log_path=run_dir / "judge_server.log"))
    return Run(job, run_dir, tasks, policy, frozen, judge_server, init_path, t_start, cpu_start)
