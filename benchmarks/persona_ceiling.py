"""How far reward alone could take the default model on a persona.

RL without a teacher can only make likelier what the policy already samples. For each held-out
request we draw k replies from the untrained model at the rollout temperature and grade each with
the persona's own rules: `pass@k` is the share of requests where at least one sample meets every
want, per want as well. A persona whose pass@k is near the greedy score cannot gain +0.3 from
reward: the wanted reply is not in reach of sampling. The held-out requests repeat questions (with
another opener or closer), so the same numbers over distinct questions are printed beside them.

    python benchmarks/persona_ceiling.py                          # brief, casual, student; k=16, T=1.0
    python benchmarks/persona_ceiling.py --personas brief --k 32 --temperature 0.7

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agents.factory import model_path
from envs.chat.personas import load_personas
from envs.chat.user import reply_text
from nextstate.config import compose, model_config


def sample(tok, model, messages: list[dict], k: int, temperature: float, max_new_tokens: int) -> list[str]:
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    prompt = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=max_new_tokens,
                             do_sample=temperature > 0, temperature=temperature or None, top_p=None, top_k=None,
                             num_return_sequences=k, pad_token_id=tok.eos_token_id)
    return [tok.decode(seq[prompt.shape[1]:], skip_special_tokens=True) for seq in out]


def ceiling(persona: str, k: int, temperature: float, tok, model, system: str, max_new_tokens: int) -> dict:
    tasks = load_personas(persona, split="test")
    checks = [w.check for w in tasks[0].data["requests"][0].wants]
    rows = []  # (question, [greedy: per want met], [per sample: per want met])
    for task in tasks:
        request = task.data["requests"][0]
        messages = [{"role": "system", "content": system}, {"role": "user", "content": request.text}]
        greedy = reply_text(sample(tok, model, messages, 1, 0.0, max_new_tokens)[0])
        samples = [reply_text(s) for s in sample(tok, model, messages, k, temperature, max_new_tokens)]
        met = [[w.met(s) for w in request.wants] for s in samples]
        rows.append((request.reference, [w.met(greedy) for w in request.wants], met))

    def summarize(rs) -> dict:
        n = len(rs)
        return {"n": n,
                "greedy": round(sum(all(g) for _, g, _ in rs) / n, 3),
                "want_greedy": {c: round(sum(g[i] for _, g, _ in rs) / n, 3) for i, c in enumerate(checks)},
                "sample_success": round(sum(all(m) for _, _, ms in rs for m in ms) / (n * k), 3),
                "pass_at_k": round(sum(any(all(m) for m in ms) for _, _, ms in rs) / n, 3),
                "want_pass_at_k": {c: round(sum(any(m[i] for m in ms) for _, _, ms in rs) / n, 3)
                                   for i, c in enumerate(checks)},
                "want_sample_rate": {c: round(sum(m[i] for _, _, ms in rs for m in ms) / (n * k), 3)
                                     for i, c in enumerate(checks)}}
    distinct = list({q: (q, g, ms) for q, g, ms in rows}.values())  # the first request of each question
    return {"requests": summarize(rows), "questions": summarize(distinct)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--personas", default="brief,casual,student")
    ap.add_argument("--k", type=int, default=16, help="samples per request (16 = one update's rollouts)")
    ap.add_argument("--temperature", type=float, default=None, help="default: the experiment's rollout temperature")
    args = ap.parse_args()
    cfg = compose(["+experiment=personalization"])
    temperature = cfg.mode.rollout_temperature if args.temperature is None else args.temperature
    path = model_path(model_config(cfg.model), cfg.paths.cache_dir)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    torch.manual_seed(0)
    summary = {}
    for persona in args.personas.split(","):
        t0 = time.monotonic()
        row = ceiling(persona, args.k, temperature, tok, model, cfg.env.system_prompt, cfg.model.max_new_tokens)
        for unit in ("requests", "questions"):
            r = row[unit]
            print(f"{persona} ({r['n']} {unit}): greedy {r['greedy']}, per sample {r['sample_success']}, "
                  f"pass@{args.k} {r['pass_at_k']}; per want greedy {r['want_greedy']}, "
                  f"pass@{args.k} {r['want_pass_at_k']}, "
                  f"per sample {r['want_sample_rate']}")
        print(f"  ({time.monotonic() - t0:.0f} s)")
        summary[persona] = row
    print(json.dumps({"metric": "persona_pass_at_k_minus_greedy", "value": round(sum(
        r["requests"]["pass_at_k"] - r["requests"]["greedy"] for r in summary.values()) / len(summary), 3),
        "higher_is_better": None, "k": args.k, "temperature": temperature, **summary}))


if __name__ == "__main__":
    main()
