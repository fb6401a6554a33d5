"""What the oracle hint does to the OPD teacher (the OPD teacher's logprob shift
with and without the hint), on a persona's train requests.

For each request, the frozen teacher (the default model) scores the request's reference reply with
and without the hint appended as the experiment appends it (`hints.teacher_suffix`), and we read
the teacher's first-token distribution: the share of its mass on lowercase and on "hey"-like tokens.
A teacher that only copies the reference shows a large log p gain and little change in the mass of
the style the persona wants: what OPD can pass on from it is then the opening, not the preference.

    python benchmarks/hint_shift.py                      # casual, brief, student; 20 requests each
    python benchmarks/hint_shift.py --personas student --n 40

The last line is the JSON summary.
"""
from __future__ import annotations

import argparse
import json

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from agents.factory import model_path
from envs.chat.personas import load_personas
from nextstate.config import compose, model_config
from nextstate.types import NextState, Step
from trainers.feedback.model_judge import teacher_messages


def first_token_masks(tok) -> tuple[torch.Tensor, torch.Tensor]:
    words = [tok.decode([i]).strip() for i in range(len(tok))]
    lower = torch.tensor([bool(w) and w[0].isalpha() and w[0].islower() for w in words])
    hey = torch.tensor([w.lower().startswith("hey") for w in words])
    return lower, hey


def shift(persona: str, n: int, tok, model, system: str, suffix: str) -> dict:
    lower, hey = first_token_masks(tok)
    arms = ("plain", "hinted")
    out: dict[str, list[float]] = {f"{k}_{a}": [] for k in ("ref_logp", "lower", "hey") for a in arms}
    for task in load_personas(persona, split="train")[:n]:
        request = task.data["requests"][0]
        plain = [{"role": "system", "content": system}, {"role": "user", "content": request.text}]
        step = Step(0, plain, request.reference, NextState(kind="user", text=""))
        for arm, messages in (("plain", plain), ("hinted", teacher_messages(step, request.reference, suffix))):
            prompt = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
            ref = tok(request.reference, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logp = model(torch.tensor([prompt + ref])).logits[0].log_softmax(-1)
            n_prompt = len(prompt)
            token_logp = logp[n_prompt - 1:-1].gather(1, torch.tensor(ref)[:, None])
            first = logp[n_prompt - 1].exp()
            out[f"ref_logp_{arm}"].append(token_logp.mean().item())
            out[f"lower_{arm}"].append(first[lower].sum().item())
            out[f"hey_{arm}"].append(first[hey].sum().item())
    return {k: round(sum(v) / len(v), 3) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--personas", default="casual,brief,student")
    ap.add_argument("--n", type=int, default=20, help="train requests per persona")
    args = ap.parse_args()
    cfg = compose(["+experiment=personalization"])
    path = model_path(model_config(cfg.model), cfg.paths.cache_dir)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    summary = {}
    for persona in args.personas.split(","):
        row = shift(persona, args.n, tok, model, cfg.env.system_prompt, cfg.hints.teacher_suffix)
        print(f"{persona}: mean log p(reference token) {row['ref_logp_plain']} -> {row['ref_logp_hinted']} with the "
              f"hint; first-token mass lowercase {row['lower_plain']} -> {row['lower_hinted']}, "
              f"'hey' {row['hey_plain']} -> {row['hey_hinted']}")
        summary[persona] = row
    print(json.dumps({"metric": "hint_shift_ref_logp_gain", "value": round(
        sum(r["ref_logp_hinted"] - r["ref_logp_plain"] for r in summary.values()) / len(summary), 3),
        "higher_is_better": None, **summary}))


if __name__ == "__main__":
    main()
