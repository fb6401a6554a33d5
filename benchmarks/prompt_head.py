"""What running the shared prompt head once saves in a PPO update (`mode.share_prompt_head`).

Every step of a suite starts with the same tokens (the system prompt and the tool list: 132 of a
tool-call step's ~235 prompt tokens), and the update's forward and backward pass runs them once per
row; with the head shared they run once per micro-batch, and each row attends to that one KV.

For the oracle trajectories of N train instances of the experiment's suite, from its start model: the
same update (the experiment's minibatches, micro-batches, clipping and KL term; each step a seeded +1
or -1 advantage) from the same weights, with and without the shared head, interleaved `--repeats`
times so that the machine's noise hits both alike. Printed: the median seconds of each, the tokens
each runs through the model, and how far the two updates' losses and resulting weights are apart
(float rounding; Adam's step divides by the gradient's size, so a coordinate whose gradient is
near 0 may step another way: compare the weight gap with how far the update moved a weight). The JSON
value is the update's seconds without over with.

    python benchmarks/prompt_head.py                      # general_toolcall_kl, 32 instances, 3 repeats
    python benchmarks/prompt_head.py --experiment general_terminal_kl

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import torch
from adam_first_step import oracle_steps_on_start, reply_logprobs  # the script beside this one

from nextstate.types import Sample
from trainers.update import UpdateConfig, common_head, micro_batches, ppo_update, shared_rows


def tokens_through_model(samples: list[Sample], cfg: UpdateConfig, order: list[int]) -> tuple[int, int]:
    """Padded tokens the update's forward pass runs, without and with the shared head (one epoch)."""
    plain = shared = 0
    for start in range(0, len(order), cfg.minibatch_size):
        mb = [samples[i] for i in order[start: start + cfg.minibatch_size]]
        for part in micro_batches(mb, cfg.micro_batch_tokens):
            seqs = [s.prompt_ids + s.response_ids for s in part]
            rows = sorted(set(shared_rows(seqs)))
            width = max(len(seqs[r]) for r in rows)
            head = common_head(seqs, rows, [len(s.prompt_ids) for s in part]) if len(rows) > 1 else 0
            plain += len(rows) * width
            shared += len(rows) * (width - head) + head
    return plain, shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="general_toolcall_kl")
    ap.add_argument("--limit", type=int, default=32, help="train instances (their oracle trajectories)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("overrides", nargs="*", help="more config overrides")
    args = ap.parse_args()
    job, _, model, pairs = oracle_steps_on_start(args.experiment, args.overrides, args.limit, Path("/tmp/prompt_head"))
    tc = job.mode
    start_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    start_lps = reply_logprobs(model, pairs)
    signs = random.Random(job.seed).choices([-1.0, 1.0], k=len(pairs))
    samples = [Sample(p, r, lp.tolist(), [a] * len(r), ref_logprobs=lp.tolist())
               for (p, r), lp, a in zip(pairs, start_lps, signs)]
    base = UpdateConfig(tc.lr, tc.weight_decay, tc.grad_clip, tc.epochs, tc.minibatch_size, tc.eps_low,
                        tc.eps_high, tc.kl_coef, tc.rollout_temperature, micro_batch_tokens=tc.micro_batch_tokens)
    configs = {"one row each": base, "head shared": replace(base, share_prompt_head=True)}
    order = torch.randperm(len(samples), generator=torch.Generator().manual_seed(job.seed)).tolist()
    plain_tokens, shared_tokens = tokens_through_model(samples, base, order)

    def update(cfg: UpdateConfig) -> tuple[float, dict, dict]:
        model.load_state_dict(start_state)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=tc.lr,
                                      weight_decay=tc.weight_decay)
        t = time.perf_counter()
        stats = ppo_update(model, optimizer, samples, cfg, generator=torch.Generator().manual_seed(job.seed))
        return time.perf_counter() - t, stats, {k: v.detach().clone() for k, v in model.state_dict().items()}

    seconds: dict[str, list[float]] = {k: [] for k in configs}
    after = {}
    for _ in range(args.repeats):
        for name, cfg in configs.items():
            s, stats, state = update(cfg)
            seconds[name].append(s)
            after[name] = (stats, state)
    (stats_a, state_a), (stats_b, state_b) = after.values()
    weight_gap = max(float((state_a[k] - state_b[k]).abs().max()) for k in state_a)
    weight_move = max(float((state_a[k] - start_state[k]).abs().max()) for k in state_a)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    for name, s in med.items():
        print(f"{name:13s} update {s:6.1f} s (median of {args.repeats})")
    print(f"{len(samples)} oracle steps; tokens through the model {plain_tokens} -> "
          f"{shared_tokens}; loss {stats_a['loss']:.7f} vs {stats_b['loss']:.7f}; largest weight gap after "
          f"the update {weight_gap:.2e} (the update moved a weight by {weight_move:.2e} at most)")
    print(json.dumps({"metric": "ppo_update_seconds_ratio_without_vs_with_shared_head",
                      "value": round(med["one row each"] / med["head shared"], 2),
                      "seconds": {k: round(v, 1) for k, v in med.items()},
                      "tokens": {"one row each": plain_tokens, "head shared": shared_tokens},
                      "loss_gap": abs(stats_a["loss"] - stats_b["loss"]),
                      "weight_gap": weight_gap, "weight_move": weight_move,
                      "experiment": args.experiment, "steps": len(samples)}))


if __name__ == "__main__":
    main()
