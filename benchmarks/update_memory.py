"""Peak memory of one PPO update on long samples (the proxy's case: a client's prompt of thousands of
tokens), with the whole minibatch in one pass and in token-budget micro-batches with gradient
checkpointing (`mode.micro_batch_tokens`, `mode.gradient_checkpointing`). Each configuration runs in
a fresh process, so its peak RSS (the kernel's `ru_maxrss`) is its own. Ends with one JSON line.

    python benchmarks/update_memory.py                              # 16 samples of 4k tokens, micro-batched
    python benchmarks/update_memory.py --samples 4 --whole          # also one pass (needs far more memory)
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_GB = 6.0  # an update on 16 samples of 4k tokens at the default model


def one_update(samples: int, tokens: int, micro: int, checkpointing: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from agents.factory import model_path
    from nextstate.config import ModelConfig, compose, typed
    from nextstate.types import Sample
    from trainers.update import UpdateConfig, ppo_update

    cfg = compose()
    model = AutoModelForCausalLM.from_pretrained(model_path(typed(cfg.model, ModelConfig), cfg.paths.cache_dir))
    if checkpointing:
        model.gradient_checkpointing_enable()
    g = torch.Generator().manual_seed(0)
    resp = 64
    batch = [Sample(torch.randint(100, 40000, (tokens - resp,), generator=g).tolist(),
                    torch.randint(100, 40000, (resp,), generator=g).tolist(), [-10.0] * resp, [0.5] * resp)
             for _ in range(samples)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    t = time.perf_counter()
    ppo_update(model, opt, batch, UpdateConfig(1e-6, 0.0, 1.0, 1, samples, 0.2, 0.28, 0.0, 1.0,
                                               micro_batch_tokens=micro))
    return {"seconds": round(time.perf_counter() - t, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def measure(samples: int, tokens: int, micro: int, checkpointing: bool) -> dict:
    """`one_update` in a child process (its own peak)."""
    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import update_memory as m; "
            f"print(json.dumps(m.one_update({samples}, {tokens}, {micro}, {checkpointing})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--micro", type=int, default=4096, help="mode.micro_batch_tokens")
    ap.add_argument("--whole", action="store_true", help="also measure the minibatch in one pass")
    a = ap.parse_args()
    runs = {"micro-batched + checkpointing": measure(a.samples, a.tokens, a.micro, True)}
    if a.whole:
        runs["one pass"] = measure(a.samples, a.tokens, 0, False)
    for name, r in runs.items():
        print(f"{name:32s} peak RSS {r['peak_rss_gb']:6.2f} GB  {r['seconds']:7.1f} s  "
              f"({a.samples} samples of {a.tokens} tokens)")
    best = runs["micro-batched + checkpointing"]
    print(json.dumps({"metric": "update_peak_rss_gb", "value": best["peak_rss_gb"], "target": TARGET_GB,
                      "higher_is_better": False, "samples": a.samples, "tokens": a.tokens,
                      "micro_batch_tokens": a.micro, **{f"{k} s": v["seconds"] for k, v in runs.items()}}))


if __name__ == "__main__":
    main()
