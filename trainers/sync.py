"""`mode=train`: the synchronous training loop that compares the four signals on any env.

  eval before (test split, greedy) -> for each iteration:
    rollouts (train split, temperature 1, group_size per task, seeded per episode)
    -> judge votes (PRM) / hindsight hints -> teacher logprobs (OPD)
    -> samples with per-token advantages -> PPO update -> weights pushed to the serving endpoint
    -> checkpoint (a killed run resumes with resume=<run_dir> and takes the same next step)
  -> eval after -> leaderboard row (+ the sweep's success-vs-samples plot).

Servers: the policy endpoint serves rollouts (and the teacher when teacher=policy); a second,
frozen endpoint on the initial checkpoint serves the judge, the hints and the frozen teacher / KL
reference. Both speak the same protocol (embedded CPU server or SGLang).
"""
from __future__ import annotations

import datetime as dt
import random
import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig

from agents.base import ModelAgent
from agents.factory import model_path, serve_policy
from agents.pool import EnvPool, run_episodes, summarize
from agents.serving.backend import BackendConfig
from agents.serving.transformers_policy import SamplingConfig
from envs.make import env_maker
from envs.sandbox import wait_for_background_removals
from nextstate.atomic import append_jsonl, read_jsonl, write_json_atomic
from nextstate.config import ModelConfig, check_ranges, model_config, typed
from nextstate.leaderboard import append_row, git_commit
from trainers.checkpoint import load_checkpoint, save_checkpoint, save_weights
from trainers.cpu_time import cpu_seconds
from trainers.curriculum import filter_tasks, max_steps_at, without_tags
from trainers.eval_cache import EvalCache
from trainers.feedback.judge_accuracy import judge_accuracy
from trainers.feedback.model_judge import HintConfig, JudgeConfig, ModelJudge, next_state_hint, teacher_messages
from trainers.feedback.oracle_judge import OracleHints, OracleJudge
from trainers.signals import SignalConfig, build_samples, collect_steps
from trainers.train_plot import write_train_plot
from trainers.update import UpdateConfig, ppo_update


@dataclass
class TrainConfig:
    name: str
    iterations: int
    tasks_per_iter: int
    group_size: int
    rollout_temperature: float
    eval_limit: int | None
    eval_every: int
    teacher: str
    lora: bool
    lora_r: int
    lora_alpha: int
    lr: float
    weight_decay: float
    grad_clip: float
    epochs: int
    minibatch_size: int
    eps_low: float
    eps_high: float
    kl_coef: float
    gradient_checkpointing: str
    max_steps_start: int | None = None
    difficulties: list[str] | None = None
    tags: list[str] | None = None
    keep_checkpoint: bool = True
    threads: int | None = None

    def update_config(self) -> UpdateConfig:
        return UpdateConfig(self.lr, self.weight_decay, self.grad_clip, self.epochs, self.minibatch_size,
                            self.eps_low, self.eps_high, self.kl_coef, self.rollout_temperature)


def check_training_ranges(tc: TrainConfig, judge: JudgeConfig, hints: HintConfig) -> None:
    """Numbers that would train nothing, or break the update (a zero temperature divides the logits),
    stop the run before its servers and its first evaluation start."""
    check_ranges("mode", tc, at_least={"iterations": 0, "tasks_per_iter": 1, "group_size": 1, "eval_limit": 1,
                                       "eval_every": 0, "epochs": 1, "minibatch_size": 1, "lora_r": 1,
                                       "weight_decay": 0, "eps_low": 0, "eps_high": 0, "kl_coef": 0,
                                       "max_steps_start": 1, "threads": 1},
                 above={"rollout_temperature": 0, "lr": 0, "grad_clip": 0})
    if hasattr(tc, "batch_samples"):  # mode=async and mode=proxy
        check_ranges("mode", tc, at_least={"batch_samples": 1, "max_staleness": 0, "judge_workers": 1})
    if judge.name == "model":  # the oracle judge reads labels: no votes to sample
        check_ranges("judge", judge, at_least={"m": 1, "max_new_tokens": 1, "temperature": 0})
    if hints.name == "model":
        check_ranges("hints", hints, at_least={"m": 1, "max_new_tokens": 1, "temperature": 0, "min_chars": 0})


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


def _eval(pool, policy, tasks, system_prompt, seed, parallel, progress, desc, out_file: Path) -> dict:
    trajs = run_episodes(pool, lambda i: ModelAgent(policy), tasks, system_prompt=system_prompt, seed=seed,
                         parallel=parallel, progress=progress, desc=desc)
    for t in trajs:
        append_jsonl(out_file, t.to_dict())
    return summarize(trajs)


def _judge_and_teach(steps, judge, hinter, signal: SignalConfig, teacher, hints_cfg: HintConfig,
                     tools_of, salt: int) -> dict:
    """Fill in votes (PRM) and teacher logprobs (OPD) on the steps; return counts for the log.
    `judge.votes(steps)` and `hinter(judged_steps)` come from the model judge or the oracles."""
    info = {"judge_votes": 0, "hints_accepted": 0, "steps": len(steps), "judge_s": 0.0, "hints_s": 0.0,
            "teacher_s": 0.0}
    if not steps:
        return info
    plain = [st.step for st in steps]
    t0 = time.monotonic()
    if signal.use_prm:
        for st, j in zip(steps, judge.votes(plain, salt=salt)):
            st.judgement = j
            info["judge_votes"] += sum(v is not None for v in j.votes)
    t1 = time.monotonic()
    info["judge_s"] = round(t1 - t0, 2)
    if signal.use_opd:
        hints = hinter(steps)
        t2 = time.monotonic()
        info["hints_s"] = round(t2 - t1, 2)
        pairs, hinted = [], []
        for st, hint in zip(steps, hints):
            if hint:
                msgs = teacher_messages(st.step, hint, hints_cfg.teacher_suffix)
                pairs.append((teacher.prompt_ids(msgs, tools_of(st.group)), st.response_ids))
                hinted.append((st, hint))
        scored = teacher.score_many(pairs, top_k=signal.opd_topk) if pairs else []
        for (st, hint), (lps, top) in zip(hinted, scored):
            st.teacher_logprobs, st.teacher_top = lps, top
            st.step.info["hint"] = hint
        info["hints_accepted"] = len(hinted)
        info["teacher_s"] = round(time.monotonic() - t2, 2)
    return info


@dataclass
class Training:
    """A training run's parts, built once by `start_training`; the synchronous loop (`train_main`) and
    the asynchronous one (trainers/async_train.py) differ only in how they schedule them."""
    cfg: DictConfig
    run_dir: Path
    tc: TrainConfig
    signal: SignalConfig
    model_cfg: ModelConfig
    env_cfg: object
    judge_cfg: JudgeConfig
    hints_cfg: HintConfig
    pool: EnvPool
    env: object
    train_tasks: list
    test_tasks: list
    tools: dict
    policy: object
    frozen: object
    judge: object
    hinter: object
    teacher: object
    model: object
    optimizer: object
    state: dict
    eval_sampling: SamplingConfig
    roll_sampling: SamplingConfig
    t_start: float
    cpu_start: float

    @property
    def state_file(self) -> Path:
        return self.run_dir / "checkpoint"

    @property
    def log_file(self) -> Path:
        return self.run_dir / "train_log.jsonl"

    def rollout_agent(self, seed: int) -> ModelAgent:
        return ModelAgent(self.policy, self.roll_sampling, seed=seed % 2**31)

    def samples(self, trajs, salt: int) -> tuple[list, list, dict]:
        """Judge and teach the trajectories' steps, then build the signal's samples (with KL
        reference logprobs when asked): (samples, judged steps, counts for the log)."""
        steps = collect_steps(trajs)
        info = _judge_and_teach(steps, self.judge, self.hinter, self.signal, self.teacher, self.hints_cfg,
                                self.tools.get, salt=salt)
        samples = build_samples(self.signal, steps, trajs)
        if self.tc.kl_coef > 0 and samples:
            for s, (lps, _) in zip(samples, self.frozen.score_many([(s.prompt_ids, s.response_ids) for s in samples])):
                s.ref_logprobs = lps
        return samples, steps, info

    def update(self, samples, seed: int) -> dict:
        """One PPO update of the trainer's model (the server still serves the old weights)."""
        return ppo_update(self.model, self.optimizer, samples, self.tc.update_config(),
                          generator=torch.Generator().manual_seed(seed % 2**31))

    def publish(self) -> None:
        """The trainer's weights to the serving endpoint."""
        self.policy.update_weights_from_disk(str(save_weights(self.model, self.run_dir / "weights")))

    def count(self, trajs, n_samples: int, steps, info) -> None:
        """Add episodes, samples, tokens and judge results to the run's totals."""
        st = self.state
        st["train_episodes"] += len(trajs)
        st["train_samples"] += n_samples
        st["tokens"] += sum(t.n_tokens for t in trajs)
        st["judge_votes"] += info["judge_votes"]
        st["hints_accepted"] += info["hints_accepted"]
        st["step_scores"] += [s.judgement.score for s in steps if s.judgement]
        st["judge_pairs"] += [[s.judgement.score, s.step.info.get("step_label")] for s in steps
                              if s.judgement and s.step.info.get("step_label")]

    def evaluate(self, desc: str, out_file: Path) -> dict:
        self.policy.sampling = self.eval_sampling
        return _eval(self.pool, self.policy, self.test_tasks, self.env_cfg.system_prompt, self.cfg.seed,
                     self.cfg.parallel, self.cfg.progress, desc, out_file)

    def checkpoint(self) -> None:
        save_checkpoint(self.state_file, self.model, self.optimizer, self.state)


HINTERS = ("model", "oracle", "next_state")


def start_training(cfg: DictConfig, run_dir: Path, stack: ExitStack, config_cls: type = TrainConfig, *,
                   with_env: bool = True) -> Training:
    """Envs, servers (policy; a frozen one for the judge, hints, frozen teacher, KL), the trainable
    model and optimizer, and the run's state: loaded from its checkpoint, or fresh after the
    evaluation before training. Without an env (`mode=proxy`: the steps come from live sessions)
    there are no tasks and no evaluation. Everything started is closed by `stack`."""

    t_start, cpu_start = time.monotonic(), cpu_seconds()
    tc = typed(cfg.mode, config_cls)
    signal = typed(cfg.signal, SignalConfig)
    model_cfg = model_config(cfg.model)
    backend = typed(cfg.backend, BackendConfig)
    judge_cfg, hints_cfg = typed(cfg.judge, JudgeConfig), typed(cfg.hints, HintConfig)
    init_path = Path(cfg.model.get("init_from") or model_path(model_cfg, cfg.paths.cache_dir))
    eval_sampling = SamplingConfig(model_cfg.max_new_tokens, 0.0, 1.0, model_cfg.max_prompt_tokens)
    roll_sampling = SamplingConfig(model_cfg.max_new_tokens, tc.rollout_temperature, 1.0, model_cfg.max_prompt_tokens)
    if hints_cfg.name not in HINTERS:
        raise SystemExit(f"hints={hints_cfg.name} is unknown ({' | '.join(HINTERS)})")
    check_training_ranges(tc, judge_cfg, hints_cfg)
    if model_cfg.top_p != 1.0:  # the update's logprobs are of the whole distribution, as the rollout's must be
        raise SystemExit(f"model.top_p={model_cfg.top_p}: training samples at top_p 1.0 (the PPO ratio compares "
                         "whole-distribution logprobs); set model.top_p=1.0")
    reads_labels = (signal.use_prm and judge_cfg.name == "oracle") or (signal.use_opd and hints_cfg.name == "oracle")
    if not with_env and reads_labels:
        raise SystemExit("judge=oracle and hints=oracle read a task's labels and reference; this mode has no tasks")
    needs_frozen = ((signal.use_prm and judge_cfg.name != "oracle") or (signal.use_opd and hints_cfg.name == "model")
                    or (signal.use_opd and tc.teacher == "frozen") or tc.kl_coef > 0)

    pool = env = env_cfg = None
    train_tasks, test_tasks, tools = [], [], {}
    if with_env:
        make_env, env_cfg = env_maker(cfg, run_dir, split=None)
        pool = EnvPool(make_env)
        stack.callback(wait_for_background_removals)
        stack.callback(pool.close)
        env = pool.get().unwrapped
        suite = without_tags(env.tasks, cfg.get("exclude_tags"))
        train_tasks = filter_tasks([t for t in suite if t.split == "train"], tc.difficulties, tc.tags)
        test_tasks = [t for t in suite if t.split == "test"][: tc.eval_limit or None]
        if not train_tasks or not test_tasks:
            raise SystemExit(f"env {env_cfg.name} needs train tasks (after the difficulty/tag filter) and test tasks")
        if hasattr(env, "prepare"):
            env.prepare(train_tasks + test_tasks)
        tools = {t.task_id: env.tools_for(t) for t in env.tasks}

    policy = stack.enter_context(serve_policy(model_cfg, backend, cfg.paths.cache_dir, path=init_path,
                                              log_path=run_dir / "server.log"))
    frozen = None
    if needs_frozen:
        judge_path = Path(judge_cfg.model) if judge_cfg.model else init_path
        frozen = stack.enter_context(serve_policy(model_cfg, backend, cfg.paths.cache_dir, path=judge_path,
                                                  log_path=run_dir / "judge_server.log"))
    model_judge = ModelJudge(frozen, judge_cfg, hints_cfg, seed=cfg.seed) if frozen is not None else None
    judge = OracleJudge(judge_cfg.m) if judge_cfg.name == "oracle" else model_judge
    if hints_cfg.name == "oracle":  # built only from each task's own reference solution
        by_id = {t.task_id: t for t in train_tasks}
        oracle = OracleHints(lambda tid: env.reference_actions(by_id[tid]))
        hinter = lambda sts: oracle.hints_for([st.group for st in sts], [st.step for st in sts])  # noqa: E731
    elif hints_cfg.name == "next_state":
        hinter = lambda sts: [next_state_hint(st.step, hints_cfg.min_chars) for st in sts]  # noqa: E731
    else:
        hinter = lambda sts: model_judge.hints([st.step for st in sts])  # noqa: E731
    teacher = frozen if tc.teacher == "frozen" else policy
    if tc.teacher not in ("frozen", "policy"):
        raise SystemExit(f"mode.teacher must be frozen or policy, not {tc.teacher!r}")

    if tc.threads:  # parallel sweep jobs on a small machine: oversubscribed torch threads collapse
        torch.set_num_threads(tc.threads)
    torch.manual_seed(cfg.seed)
    model = load_trainable(init_path, tc, model_cfg.dtype)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=tc.lr,
                                  weight_decay=tc.weight_decay)
    tr = Training(cfg, run_dir, tc, signal, model_cfg, env_cfg, judge_cfg, hints_cfg, pool, env, train_tasks,
                  test_tasks, tools, policy, frozen, judge, hinter, teacher, model, optimizer, {}, eval_sampling,
                  roll_sampling, t_start, cpu_start)
    state = load_checkpoint(tr.state_file, model, optimizer)
    if state is not None:  # resumed: the server must serve the checkpoint's weights again
        policy.update_weights_from_disk(str(save_weights(model, run_dir / "weights")))
        print(f"[train] resumed after iteration {state['iteration']}")
    elif not with_env:
        state = {"iteration": -1, "success_before": None, "train_episodes": 0, "train_samples": 0, "tokens": 0,
                 "judge_votes": 0, "hints_accepted": 0, "step_scores": [], "judge_pairs": [], "curve": []}
    else:
        policy.sampling = eval_sampling
        (run_dir / "eval_before.jsonl").unlink(missing_ok=True)  # a run killed before its first checkpoint
        cache = EvalCache(Path(cfg.paths.cache_dir) / "evals", init_path, env_cfg, test_tasks, eval_sampling,
                          cfg.seed if getattr(env, "seed_shapes_episodes", True) else None)
        before = cache.get()
        if before is None:  # greedy decoding of the same weights on the same tasks: computed once per sweep
            before = tr.evaluate("eval before", run_dir / "eval_before.jsonl")
            cache.put(before)
        state = {"iteration": -1, "success_before": before["success_rate"], "train_episodes": 0,
                 "train_samples": 0, "tokens": 0, "judge_votes": 0, "hints_accepted": 0,
                 "step_scores": [], "judge_pairs": [], "curve": [[0, before["success_rate"]]]}
    tr.state = state
    return tr


def train_main(cfg: DictConfig, run_dir: Path) -> dict:
    with ExitStack() as stack:
        tr = start_training(cfg, run_dir, stack)
        tc, state, pool = tr.tc, tr.state, tr.pool
        loop_start = time.monotonic()
        for it in range(state["iteration"] + 1, tc.iterations):
            rng = random.Random(hash((cfg.seed, it)))
            chosen = rng.sample(tr.train_tasks, min(tc.tasks_per_iter, len(tr.train_tasks)))
            batch = [t for t in chosen for _ in range(tc.group_size)]
            tr.policy.sampling = tr.roll_sampling
            pool.set_max_steps(max_steps_at(it, tc.iterations, tc.max_steps_start, tr.env_cfg.max_steps))
            t0 = time.monotonic()
            trajs = run_episodes(
                pool, lambda i, it=it: tr.rollout_agent(hash((cfg.seed, it, i))),
                batch, system_prompt=tr.env_cfg.system_prompt, seed=cfg.seed, parallel=cfg.parallel,
                progress=cfg.progress, desc=f"rollouts {it + 1}/{tc.iterations}")
            t1 = time.monotonic()
            samples, steps, info = tr.samples(trajs, salt=it)
            t2 = time.monotonic()
            stats = tr.update(samples, seed=hash((cfg.seed, it)))
            t3 = time.monotonic()
            tr.publish()
            info.update(rollout_s=round(t1 - t0, 2), signal_s=round(t2 - t1, 2), update_s=round(t3 - t2, 2),
                        publish_s=round(time.monotonic() - t3, 2))
            state["iteration"] = it
            tr.count(trajs, len(samples), steps, info)
            log = {"iteration": it, "elapsed_s": round(time.monotonic() - loop_start, 2), "episodes": len(trajs),
                   "samples": len(samples),
                   "rollout_success": sum(t.success for t in trajs) / max(1, len(trajs)), **info, **stats}
            pool.set_max_steps(tr.env_cfg.max_steps)  # evaluation always uses the env's own limit
            if tc.eval_every and (it + 1) % tc.eval_every == 0 and it + 1 < tc.iterations:
                t4 = time.monotonic()
                mid = tr.evaluate(f"eval @{it + 1}", run_dir / f"eval_it{it + 1}.jsonl")
                state["curve"].append([state["train_episodes"], mid["success_rate"]])
                log.update(eval_success=mid["success_rate"], eval_s=round(time.monotonic() - t4, 2))
            append_jsonl(tr.log_file, log)
            tr.checkpoint()
            print(f"[train] it {it + 1}/{tc.iterations}: {len(samples)} samples, loss {stats.get('loss', 0):.4f}, "
                  f"rollout success {log['rollout_success']:.2f}")
        after = evaluate_after(tr)
    return finish_training(tr, after)


def evaluate_after(tr: Training) -> dict:
    after_file = tr.run_dir / "eval_after.jsonl"
    after_file.unlink(missing_ok=True)
    after = tr.evaluate("eval after", after_file)
    tr.state["curve"].append([tr.state["train_episodes"], after["success_rate"]])
    return after


def finish_training(tr: Training, after: dict, extra: dict | None = None) -> dict:
    """metrics.json, the leaderboard row, the run's training curves and the sweep plot of a finished run."""
    cfg, tc, signal, state, run_dir = tr.cfg, tr.tc, tr.signal, tr.state, tr.run_dir
    model_cfg, env_cfg, judge_cfg, hints_cfg = tr.model_cfg, tr.env_cfg, tr.judge_cfg, tr.hints_cfg
    acc = judge_accuracy(state["judge_pairs"])
    scores = state["step_scores"]
    metrics = {
        "env": env_cfg.name, "suite": getattr(env_cfg, "suite", "-"), "signal": signal.name,
        "model": model_cfg.name, "seed": cfg.seed, "teacher": tc.teacher if signal.use_opd else "-",
        "judge": judge_cfg.name if signal.use_prm else "-", "hints": hints_cfg.name if signal.use_opd else "-",
        "iterations": tc.iterations, "train_episodes": state["train_episodes"], "train_samples": state["train_samples"],
        "success_before": state["success_before"], "success_after": after["success_rate"],
        "delta": after["success_rate"] - state["success_before"],
        "mean_step_score": sum(scores) / len(scores) if scores else None,
        "judge_votes": state["judge_votes"], "hints_accepted": state["hints_accepted"],
        "judge_neg_precision": acc["precision"], "judge_neg_recall": acc["recall"], "judge_labeled_steps": acc["n"],
        "tokens": state["tokens"], "wall_s": round(time.monotonic() - tr.t_start, 1),
        "cpu_s": round(cpu_seconds() - tr.cpu_start, 1), "curve": state["curve"],
        **(extra or {}),
        "train_log": read_jsonl(tr.log_file),
    }
    write_json_atomic(run_dir / "metrics.json", metrics)
    if not tc.keep_checkpoint:  # only a killed run needs it to resume; the final weights stay
        shutil.rmtree(tr.state_file, ignore_errors=True)
    row = {"timestamp": dt.datetime.now().isoformat(timespec="seconds"), "env": metrics["env"],
           "suite": metrics["suite"], "split": "test", "agent": "model", "model": metrics["model"],
           "signal": signal.name, "seed": cfg.seed, "n_tasks": len(tr.test_tasks),
           "success_rate": round(after["success_rate"], 4), "mean_steps": round(after["mean_steps"], 2),
           "infra_failures": after["infra_failures"], "tokens": metrics["tokens"], "wall_s": metrics["wall_s"],
           "cpu_s": metrics["cpu_s"], "run_dir": str(run_dir), "git_commit": git_commit(),
           **{k: ("" if metrics[k] is None else (round(metrics[k], 4) if isinstance(metrics[k], float) else metrics[k]))
              for k in ("train_episodes", "train_samples", "success_before", "success_after", "delta",
                        "mean_step_score", "judge_votes", "hints_accepted", "judge_neg_precision",
                        "judge_neg_recall", "teacher", "judge", "hints")},
           **({"mode": tc.name} if tc.name != "train" else {})}
    append_row(Path(cfg.paths.results_dir) / "leaderboard.csv", row)
    write_train_plot(run_dir)
    print(f"[train] {signal.name}: success {metrics['success_before']:.3f} -> {metrics['success_after']:.3f} "
          f"({metrics['train_episodes']} episodes, {metrics['train_samples']} samples, {metrics['wall_s']:.0f} s)")
    return metrics
