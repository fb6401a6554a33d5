"""Prompt length of the templated terminal suite at the default model: a 135M model's context and
CPU time go to every token of the prompt, so the suite's prompts must stay short (target: at most 400
tokens per step).

For every instance (both splits) it counts, with the default model's tokenizer and chat template,
the first step's prompt (the env's system prompt + the reset observation) and the oracle's last
prompt (every reference command answered with an empty output, as they are in the sandbox).

    python benchmarks/terminal_templated_prompts.py
    python benchmarks/terminal_templated_prompts.py env.templated_seed=7    # any config override

The last line is the JSON summary.
"""
from __future__ import annotations

import json
import statistics
import sys

from transformers import AutoTokenizer

from agents.factory import model_path
from agents.serving.chat import render_prompt_ids
from envs.sandboxed import render_next_state
from envs.terminal import templated
from envs.terminal.env import first_observation
from harness.job import env_config
from nextstate.config import compose, model_config
from nextstate.types import NextState

TARGET = 400


def main(overrides: list[str]) -> None:
    cfg = compose(["env=terminal", "env.suite=templated", *overrides])
    env = env_config(cfg.env)
    tok = AutoTokenizer.from_pretrained(model_path(model_config(cfg.model), cfg.paths.cache_dir))

    quiet = render_next_state(NextState(kind="terminal", text="", exit_code=0, cwd=cfg.sandbox.workdir),
                              env.obs_max_chars)
    first, last = [], []
    for task in templated.generate(env.templated_train, env.templated_test, env.templated_seed):
        messages = [{"role": "system", "content": env.system_prompt},
                    {"role": "user", "content": first_observation(task, env.user, cfg.sandbox.workdir)}]
        first.append(len(render_prompt_ids(tok, messages)))
        for reply in templated.reference_replies(task, env.done_token)[:-1]:  # the prompt DONE answers
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": quiet}]
        last.append(len(render_prompt_ids(tok, messages)))
    print(f"{len(first)} instances; first-step prompt tokens: median {statistics.median(first)}, "
          f"max {max(first)}; the oracle's last prompt: median {statistics.median(last)}, max {max(last)}")
    print(json.dumps({"metric": "terminal_templated_prompt_tokens_max", "value": max(last), "target": TARGET,
                      "higher_is_better": False, "first_step_median": statistics.median(first),
                      "first_step_max": max(first), "last_step_median": statistics.median(last),
                      "instances": len(first)}))


if __name__ == "__main__":
    main(sys.argv[1:])
