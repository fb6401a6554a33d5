"""Prompt length of the templated tool-call suite at the default model, per step: a step's CPU cost
grows with its prompt, so the suite's prompts must stay short (target: at most 400 tokens per step).

Every instance (both splits) is played by the oracle through the env itself (its tool results are
the real ones), and each step's prompt is rendered the way the policy sees it: the experiment's system
prompt, the tool listing the chat rendering adds, the conversation so far.

    python benchmarks/toolcall_templated_prompts.py
    python benchmarks/toolcall_templated_prompts.py env.templated_seed=7    # any config override

The last line is the JSON summary.
"""
from __future__ import annotations

import json
import statistics
import sys

from transformers import AutoTokenizer

from agents.factory import model_path
from agents.serving.chat import render_prompt_ids
from envs.toolcall.env import ToolCallEnv
from harness.job import env_config
from nextstate.config import compose, model_config

TARGET = 400


def main(overrides: list[str]) -> None:
    cfg = compose(["+experiment=general_toolcall", *overrides])
    env_cfg = env_config(cfg.env)
    tok = AutoTokenizer.from_pretrained(model_path(model_config(cfg.model), cfg.paths.cache_dir))
    env = ToolCallEnv(env_cfg, split="all")
    first, every = [], []
    for task in env.tasks:
        obs, _ = env.reset(options={"task_id": task.task_id})
        messages = [{"role": "system", "content": env_cfg.system_prompt}, {"role": "user", "content": obs}]
        for reply in env.reference_actions(task):
            every.append(len(render_prompt_ids(tok, messages, env.tools_for(task))))
            if len(messages) == 2:
                first.append(every[-1])
            obs, _, done, _, _ = env.step(reply)
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": obs}]
            if done:
                break
    env.close()
    print(f"{len(first)} instances, {len(every)} steps; prompt tokens: first step median {statistics.median(first)}, "
          f"max {max(first)}; every step median {statistics.median(every)}, max {max(every)}")
    print(json.dumps({"metric": "toolcall_templated_prompt_tokens_max", "value": max(every), "target": TARGET,
                      "higher_is_better": False, "first_step_median": statistics.median(first),
                      "first_step_max": max(first), "step_median": statistics.median(every),
                      "instances": len(first)}))


if __name__ == "__main__":
    main(sys.argv[1:])
