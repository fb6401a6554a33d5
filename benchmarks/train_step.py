"""Trainer step time per signal on the same batch, in one run: outcome (advantages + PPO update),
PRM (the same update with vote-based advantages), OPD (teacher logprobs of the sampled tokens under
the hinted context + the update). The judge's generation (votes, hints) runs in its own loop in the
method's design and is reported separately, not counted in the step."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from agents.factory import model_path  # noqa: E402
from agents.serving.transformers_policy import SamplingConfig, TransformersPolicy  # noqa: E402
from nextstate.config import ModelConfig, compose, typed  # noqa: E402
from nextstate.types import Sample  # noqa: E402
from trainers.update import UpdateConfig, ppo_update  # noqa: E402

B, PROMPT, RESP, REPEATS = 4, 192, 64, 3


def main() -> None:
    cfg = compose()
    m = typed(cfg.model, ModelConfig)
    path = model_path(m, cfg.paths.cache_dir)
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    teacher = TransformersPolicy.load(path, SamplingConfig(1, 1.0, 1.0, 4096), model_name=m.name)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    upd = UpdateConfig(1e-6, 0.0, 1.0, 1, B, 0.2, 0.28, 0.0, 1.0)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 40000, (PROMPT,), generator=g).tolist() for _ in range(B)]
    resps = [torch.randint(100, 40000, (RESP,), generator=g).tolist() for _ in range(B)]
    hinted = [p + torch.randint(100, 40000, (24,), generator=g).tolist() for p in prompts]  # + a hint
    old = [teacher.input_logprobs([p + r], [len(p)])[0][0] for p, r in zip(prompts, resps)]

    def outcome_step():
        adv = [1.0, -1.0, 1.0, -1.0]
        samples = [Sample(p, r, o, [a] * RESP) for p, r, o, a in zip(prompts, resps, old, adv)]
        return ppo_update(model, opt, samples, upd)

    def prm_step():
        adv = [0.5, -1.2, 0.3, 0.4]
        samples = [Sample(p, r, o, [a] * RESP) for p, r, o, a in zip(prompts, resps, old, adv)]
        return ppo_update(model, opt, samples, upd)

    def opd_step():
        with torch.inference_mode():
            t_lps = teacher.input_logprobs([h + r for h, r in zip(hinted, resps)], [len(h) for h in hinted])
        samples = [Sample(p, r, o, [t - x for t, x in zip(tl, o)])
                   for p, r, o, (tl, _) in zip(prompts, resps, old, t_lps)]
        return ppo_update(model, opt, samples, upd)

    times = {"outcome": [], "prm": [], "opd": []}
    fns = {"outcome": outcome_step, "prm": prm_step, "opd": opd_step}
    outcome_step()  # warm-up
    for _ in range(REPEATS):  # interleaved, so machine noise hits all three alike
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k:8s} step {v:6.2f} s  ({v / med['outcome']:.2f}x outcome)   [{B} samples x {PROMPT}+{RESP} tokens]")
    print(json.dumps({"metric": "opd_step_time_vs_outcome", "value": round(med["opd"] / med["outcome"], 3),
                      "target": 1.4, "higher_is_better": False,
                      "prm_vs_outcome": round(med["prm"] / med["outcome"], 3),
                      "seconds": {k: round(v, 2) for k, v in med.items()}}))


if __name__ == "__main__":
    main()
