"""What streaming buys a user of `mode=proxy`: the time to the first streamed text against the time to
the whole reply unstreamed, through the path a user sees (the `openai` client -> the proxy's HTTP
server -> the embedded policy server), with the same prompts, seeds and length, in one run. Also what
streaming costs: the streamed reply's total time against the unstreamed one. Both replies must be
the same text (seeded sampling). Ends with one JSON line."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai  # noqa: E402

from agents.factory import serve_policy  # noqa: E402
from agents.serving.backend import BackendConfig  # noqa: E402
from nextstate.config import ModelConfig, compose, typed  # noqa: E402
from trainers.gate import Gate  # noqa: E402
from trainers.proxy.http import serve  # noqa: E402
from trainers.proxy.server import Proxy  # noqa: E402
from trainers.proxy.sessions import SessionBook  # noqa: E402

PROMPTS = ["Explain what a unit test is.", "Write a haiku about the sea.", "How do I list files in a shell?",
           "Give three tips for better sleep.", "What is the capital of France, and why?"]
MAX_TOKENS, ROUNDS = 48, 2


def main() -> None:
    cfg = compose([])
    model = typed(cfg.model, ModelConfig)
    with serve_policy(model, typed(cfg.backend, BackendConfig), cfg.paths.cache_dir) as policy:
        proxy = Proxy(policy, Gate(0), SessionBook(), policy.sampling, model.name)
        server = serve(proxy, "127.0.0.1", 0)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="-",
                               max_retries=0, timeout=300)
        ask = dict(model=model.name, max_tokens=MAX_TOKENS, temperature=1.0)
        client.chat.completions.create(messages=[{"role": "user", "content": "hi"}], **ask)  # warm-up
        whole_s, first_s, streamed_s, tokens = [], [], [], []
        for r in range(ROUNDS):
            for i, prompt in enumerate(PROMPTS):
                msgs = [{"role": "user", "content": prompt}]
                t0 = time.perf_counter()
                whole = client.chat.completions.create(messages=msgs, seed=100 * r + i, **ask)
                whole_s.append(time.perf_counter() - t0)
                t0, first, pieces = time.perf_counter(), None, []
                for chunk in client.chat.completions.create(messages=msgs, seed=100 * r + i, stream=True, **ask):
                    if chunk.choices and chunk.choices[0].delta.content:
                        first = first or time.perf_counter() - t0
                        pieces.append(chunk.choices[0].delta.content)
                streamed_s.append(time.perf_counter() - t0)
                if "".join(pieces) != whole.choices[0].message.content:
                    raise SystemExit(f"streamed and whole replies differ for {prompt!r}")
                first_s.append(first if first is not None else streamed_s[-1])
                tokens.append(whole.usage.completion_tokens)
        server.close()
    ratio = statistics.median(w / f for w, f in zip(whole_s, first_s))
    cost = statistics.median(s / w for s, w in zip(streamed_s, whole_s))
    print(f"{len(whole_s)} replies, {statistics.mean(tokens):.0f} tokens on average (max {MAX_TOKENS})")
    print(f"  whole reply, unstreamed: median {statistics.median(whole_s):.2f} s")
    print(f"  first streamed text:     median {statistics.median(first_s):.2f} s  ({ratio:.1f}x sooner)")
    print(f"  streamed reply, total:   median {statistics.median(streamed_s):.2f} s  ({cost:.2f}x the unstreamed time)")
    print(json.dumps({"metric": "proxy_stream_first_text_sooner_than_whole_reply", "value": round(ratio, 2),
                      "higher_is_better": True, "stream_total_vs_whole": round(cost, 3),
                      "whole_s_median": round(statistics.median(whole_s), 3),
                      "first_text_s_median": round(statistics.median(first_s), 3),
                      "mean_tokens": round(statistics.mean(tokens), 1), "replies": len(whole_s)}))


if __name__ == "__main__":
    main()
