"""How far does a run's first update move the policy, with and without a learning-rate warmup?
Adam's step is m / sqrt(v): at the first step that is one gradient over its own size, so every weight
moves by the full rate whatever the gradient's scale, and a few such steps in one direction can move a
reply token's log-probability by several nats. The KL term to the start only sees that after the fact.

For the oracle trajectories of N train instances of the experiment's suite, from its start model: one
update with the experiment's settings (minibatches, clipping, KL term) on the first half of the steps,
each step given a seeded +1 or -1 advantage (an update's signs, not its values), then the held-out
half's reply tokens are scored again: the mean and largest log-probability shift and the mean k3 KL to
the start, once per warmup setting, each from the same start and the same samples. The JSON value is
the k3 KL without warmup over the k3 KL with the last warmup given.

    python benchmarks/adam_first_step.py                          # general_toolcall_kl, 64 instances, warmup 0 and 10
    python benchmarks/adam_first_step.py --warmup 0 5 20 mode.lr=4e-5

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from general_ceiling import oracle_train_trajectories, start_model  # the script beside this one
from transformers import AutoTokenizer

from agents.serving.chat import render_prompt_ids, stop_token_ids
from nextstate.types import Sample
from trainers.setup import load_trainable
from trainers.update import UpdateConfig, ppo_update


def reply_logprobs(model, pairs: list[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
    out = []
    with torch.no_grad():
        for prompt, reply in pairs:
            logits = model(input_ids=torch.tensor([prompt + reply])).logits[0, len(prompt) - 1: -1].float()
            out.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(reply)[:, None])[:, 0])
    return out


def oracle_steps_on_start(experiment: str, overrides: list[str], limit: int, run_dir: Path):
    """The experiment's job, start model path, the start as a trainable model, and the (prompt ids,
    reply ids + stop token) of every step of the oracle's episodes on `limit` train instances."""
    job, mc, path = start_model(experiment, overrides)
    if job.mode.threads:
        torch.set_num_threads(job.mode.threads)
    tasks, trajs, tools = oracle_train_trajectories(job, limit, run_dir)
    model = load_trainable(path, job.mode, mc.dtype)
    tokenizer = AutoTokenizer.from_pretrained(path)
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")  # what a chat reply stops on
    stop = end_of_turn if end_of_turn in stop_token_ids(tokenizer) else tokenizer.eos_token_id
    pairs = [(render_prompt_ids(tokenizer, step.prompt_messages, tools),
              tokenizer.encode(step.action_text, add_special_tokens=False) + [stop])
             for traj in trajs for step in traj.steps]
    return job, path, model, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="general_toolcall_kl")
    ap.add_argument("--limit", type=int, default=64, help="train instances (their oracle trajectories)")
    ap.add_argument("--warmup", type=int, nargs="+", default=[0, 10], help="mode.lr_warmup_steps to compare")
    ap.add_argument("overrides", nargs="*", help="more config overrides, e.g. mode.lr=4e-5")
    args = ap.parse_args()
    t0 = time.monotonic()
    job, path, model, pairs = oracle_steps_on_start(args.experiment, args.overrides, args.limit,
                                                    Path("/tmp/adam_first_step"))
    tc = job.mode
    half = len(pairs) // 2
    start_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    start_lps = reply_logprobs(model, pairs)
    signs = random.Random(job.seed).choices([-1.0, 1.0], k=half)
    results = {}
    for warmup in args.warmup:
        model.load_state_dict(start_state)
        samples = [Sample(p, r, lp.tolist(), [a] * len(r), ref_logprobs=lp.tolist())
                   for (p, r), lp, a in zip(pairs[:half], start_lps[:half], signs)]
        cfg = UpdateConfig(tc.lr, tc.weight_decay, tc.grad_clip, tc.epochs, tc.minibatch_size, tc.eps_low,
                           tc.eps_high, tc.kl_coef, tc.rollout_temperature, lr_warmup_steps=warmup,
                           micro_batch_tokens=tc.micro_batch_tokens)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=tc.lr,
                                      weight_decay=tc.weight_decay)
        stats = ppo_update(model, optimizer, samples, cfg, generator=torch.Generator().manual_seed(job.seed))
        shift = torch.cat([new - old for new, old in zip(reply_logprobs(model, pairs[half:]), start_lps[half:])])
        d = -shift  # ref - new, as the k3 term reads it
        results[warmup] = {"optimizer_steps": stats["updates"], "mean_lr": stats["lr"],
                           "max_abs_logp_shift": round(float(shift.abs().max()), 3),
                           "mean_abs_logp_shift": round(float(shift.abs().mean()), 4),
                           "held_out_k3_kl": round(float((d.exp() - d - 1).mean()), 4)}
        r = results[warmup]
        print(f"warmup {warmup:>3} steps: {r['optimizer_steps']} optimizer steps at mean rate {r['mean_lr']:.2e}; "
              f"held-out reply tokens: largest |shift| {r['max_abs_logp_shift']} nats, mean "
              f"{r['mean_abs_logp_shift']}, k3 KL to the start {r['held_out_k3_kl']}")
    print(f"({time.monotonic() - t0:.0f} s; {half} update steps, {len(pairs) - half} held-out steps, "
          f"lr {tc.lr:g}, start {path})")
    base, warm = results[args.warmup[0]], results[args.warmup[-1]]
    print(json.dumps({"metric": "first_update_held_out_k3_kl_ratio",
                      "value": round(base["held_out_k3_kl"] / max(warm["held_out_k3_kl"], 1e-9), 1),
                      "lr": tc.lr, "by_warmup": results}))

if __name__ == "__main__":
    main()
