"""Prompt length of the templated GUI suite at the default model: a 135M model's context and CPU time
go to every token of the prompt, so the suite's prompts must stay short (target: at most 400 tokens
per step).

The oracle plays every instance (both splits, or the first `--limit` of each) in the real Chromium,
and each step's prompt (the env's system prompt, the goal and page, the earlier actions and what they
changed) is counted with the default model's tokenizer and chat template. Also printed: the oracle's
success (every instance must be solvable) and its steps per episode.

    python benchmarks/gui_templated_prompts.py
    python benchmarks/gui_templated_prompts.py --limit 20 env.templated_train=60   # any config override

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

from tqdm import tqdm
from transformers import AutoTokenizer

import envs  # noqa: F401  (registers nextstate/GUI-v0)
from agents.base import OracleAgent
from agents.factory import model_path
from agents.rollout import run_episode
from agents.serving.chat import render_prompt_ids
from envs.gui.env import GUIEnv
from harness.job import env_config
from nextstate.config import compose, model_config

TARGET = 400


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="instances per split (0: all)")
    args, overrides = ap.parse_known_args(argv)
    cfg = compose(["env=gui_templated", *overrides])
    env_cfg = env_config(cfg.env)
    tok = AutoTokenizer.from_pretrained(model_path(model_config(cfg.model), cfg.paths.cache_dir))
    env = GUIEnv(env_cfg)
    tasks = [t for split in ("train", "test") for t in [x for x in env.tasks if x.split == split][:args.limit or None]]
    steps, first, solved, lengths, longest = [], [], 0, [], (0, "")
    try:
        for task in tqdm(tasks, desc="oracle episodes"):
            traj = run_episode(env, OracleAgent(), task, env_cfg.system_prompt)
            counts = [len(render_prompt_ids(tok, s.prompt_messages)) for s in traj.steps]
            first.append(counts[0])
            longest = max(longest, (max(counts), f"{task.task_id} step {counts.index(max(counts))}"))
            steps += counts
            solved += traj.success
            lengths.append(len(traj.steps))
    finally:
        env.close()
    print(f"{len(tasks)} instances, oracle solved {solved}; steps per episode: median "
          f"{statistics.median(lengths)}, max {max(lengths)}; prompt tokens per step: median "
          f"{statistics.median(steps)}, max {max(steps)} ({longest[1]}; first step: median {statistics.median(first)})")
    print(json.dumps({"metric": "gui_templated_prompt_tokens_max", "value": max(steps), "target": TARGET,
                      "higher_is_better": False, "step_median": statistics.median(steps),
                      "first_step_median": statistics.median(first), "instances": len(tasks),
                      "oracle_solved": solved, "steps_max": max(lengths)}))


if __name__ == "__main__":
    main(sys.argv[1:])
