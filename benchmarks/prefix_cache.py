"""Agent-step generation time with the prefix KV cache vs without it, in one run, on real tool-call
prompts (system prompt + tool schemas + the question, 700-1900 tokens).

The workload is what a GRPO rollout does: a group of G rollouts of one task sends the same first
prompt; each then sends a second prompt that extends the first with its reply and a tool result.
Both sides run the same batches through the same in-process policy (greedy, N_NEW tokens), with the
cache off and on; rounds alternate so machine noise hits both. Ends with one JSON line."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from agents.factory import model_path  # noqa: E402
from agents.serving.backend import default_server_threads  # noqa: E402
from agents.serving.chat import render_prompt_ids  # noqa: E402
from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy  # noqa: E402
from envs.sandbox import SandboxConfig  # noqa: E402
from envs.toolcall.env import ToolCallEnv, ToolCallEnvConfig  # noqa: E402
from nextstate.config import ModelConfig, compose, typed  # noqa: E402

N_NEW, GROUP, TASKS, ROUNDS = 16, 4, 2, 3
TOOL_RESULT = '<tool_response>\n{"ok": true, "rows": [[1, "Wireless Earbuds", 59.9, 12]]}\n</tool_response>'


def workload(tok):
    cfg = compose(["env=toolcall"])
    env = ToolCallEnv(typed(cfg.env, ToolCallEnvConfig), typed(cfg.sandbox, SandboxConfig), split="all",
                      run_id="bench-prefix")
    tasks = [t for t in env.tasks if t.split == "train"][:TASKS]
    out = []
    for t in tasks:
        msgs = [{"role": "system", "content": cfg.env.system_prompt}, {"role": "user", "content": t.instruction}]
        out.append((msgs, env.tools_for(t)))
    return out


def episode_steps(policy, work) -> float:
    """Step 1 (the group's shared prompt, G times) then step 2 (each reply + a tool result)."""
    t = time.perf_counter()
    for msgs, tools in work:
        first = render_prompt_ids(policy.tokenizer, msgs, tools)
        replies = policy.sample_ids([first] * GROUP)
        second = [render_prompt_ids(policy.tokenizer, [*msgs, {"role": "assistant",
                                                               "content": policy.tokenizer.decode(ids)},
                                                       {"role": "user", "content": TOOL_RESULT}], tools)
                  for ids, _, _ in replies]
        policy.sample_ids(second)
    return time.perf_counter() - t


def main() -> None:
    cfg = compose([])
    m = typed(cfg.model, ModelConfig)
    torch.set_num_threads(default_server_threads())
    policy = TransformersPolicy.load(model_path(m, cfg.paths.cache_dir), SamplingConfig(N_NEW, 0.0, 1.0, 4096),
                                     model_name=m.name)
    work = workload(policy.tokenizer)
    lengths = [len(render_prompt_ids(policy.tokenizer, msgs, tools)) for msgs, tools in work]
    ratios, off_s, on_s, hit = [], [], [], []
    for _ in range(ROUNDS):
        policy.enable_prefix_cache(0)
        off = episode_steps(policy, work)
        policy.enable_prefix_cache(32768)  # empty at the start of every round: no help from earlier rounds
        on = episode_steps(policy, work)
        pc = policy.prefix_cache
        hit.append(pc.hit_tokens / max(1, pc.hit_tokens + pc.miss_tokens))
        ratios.append(off / on)
        off_s.append(off)
        on_s.append(on)
        print(f"round: without {off:.2f} s, with {on:.2f} s ({off / on:.2f}x), {hit[-1]:.0%} of prompt tokens reused")
    print(json.dumps({"metric": "agent_step_speedup_with_prefix_cache", "value": round(statistics.median(ratios), 2),
                      "higher_is_better": True, "without_s": round(min(off_s), 2), "with_s": round(min(on_s), 2),
                      "prompt_tokens_reused": round(statistics.median(hit), 3), "first_prompt_tokens": lengths,
                      "group": GROUP, "new_tokens": N_NEW}))


if __name__ == "__main__":
    main()
