"""Embedded server generation throughput at batch 1 / 8 / 16 (real HTTP, dynamic batching) vs plain
`model.generate` at batch 1, in one run on the same model and prompt. Every request generates
exactly N tokens (ignore_eos), so tokens/s compare like with like."""
from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
import torch  # noqa: E402

from agents.factory import model_path  # noqa: E402
from agents.serving.backend import BackendConfig, Server, default_server_threads  # noqa: E402
from nextstate.config import ModelConfig, compose, typed  # noqa: E402

N_NEW = 48


def baseline_tokens_per_s(path, ids) -> float:
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(default_server_threads())  # the same threads as the server
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    x = torch.tensor([ids])
    model.generate(x, max_new_tokens=4, do_sample=False)  # warm-up
    t = time.perf_counter()
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=N_NEW, min_new_tokens=N_NEW,
                         do_sample=False, pad_token_id=model.config.eos_token_id)
    return (out.shape[1] - x.shape[1]) / (time.perf_counter() - t)


def server_tokens_per_s(url, ids, batch, headers) -> float:
    """`batch` concurrent clients, one request each: the server batches them dynamically."""
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": N_NEW, "temperature": 1.0,
                                                  "ignore_eos": True}}
    def one(i):
        sp = {**body["sampling_params"], "sampling_seed": i}
        r = requests.post(url + "/generate", json={**body, "sampling_params": sp}, headers=headers, timeout=600)
        return len(r.json()["output_ids"])
    with ThreadPoolExecutor(batch) as ex:
        t = time.perf_counter()
        n = sum(ex.map(one, range(batch)))
        return n / (time.perf_counter() - t)


def main() -> None:
    cfg = compose()
    m = typed(cfg.model, ModelConfig)
    path = model_path(m, cfg.paths.cache_dir)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    ids = tok.apply_chat_template([{"role": "user", "content": "List five shell commands for files."}],
                                  add_generation_prompt=True, tokenize=True, return_dict=False)
    with Server(typed(cfg.backend, BackendConfig), path, model_name=m.name, dtype=m.dtype) as server:
        server_tokens_per_s(server.url, ids, 2, server.headers)  # warm-up
        rates = {b: server_tokens_per_s(server.url, ids, b, server.headers) for b in (1, 8, 16)}
    base = baseline_tokens_per_s(path, ids)
    print(f"model.generate batch 1: {base:7.1f} tok/s")
    for b, r in rates.items():
        print(f"server batch {b:2d}:       {r:7.1f} tok/s  ({r / base:.2f}x)")
    print(json.dumps({"metric": "server_tok_per_s_batch16_vs_generate_batch1", "value": round(rates[16] / base, 2),
                      "target": 4.0, "higher_is_better": True,
                      "tok_per_s": {"generate_b1": round(base, 1),
                                    **{f"server_b{b}": round(r, 1) for b, r in rates.items()}}}))


if __name__ == "__main__":
    main()
