"""`python -m harness.backend_check [overrides]`: does the policy server speak every part of SGLang's
native API that rollouts, judging, OPD scoring and the proxy rely on? A minute's preflight before an
hours-long run on a real SGLang server, which this project's CI cannot start (it needs a GPU):

  python -m harness.backend_check backend=sglang backend.url=http://gpu-host:30000 model=qwen3_4b

With no overrides it starts the embedded server on the default model and checks that.
`--weights DIR` also pushes the weights in DIR (a model dir the server can read, e.g. the model it
serves) through `/update_weights_from_disk`, as training does after each update. Prints one table
(check, status, what was seen) and exits 1 if any check fails. A `warn` is a difference the
harness survives but the user should know of (a seed that does not replay its reply: SGLang honours
`sampling_seed` only with `--enable-deterministic-inference`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

from agents.serving.http_policy import HTTPPolicy
from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Generation

NAME_COLOURS = [{"role": "user", "content": "Name three colours, one per line."}]
LIST_FILES = [{"role": "user", "content": "Write a shell command that lists files."}]
LOGPROB_TOLERANCE = 0.05  # nats: a GPU's bf16 sampling and scoring kernels differ a little


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    seen: str


class _Skipped(Exception):
    """A check that needs what an earlier, failed check would have left."""


def _needs(state: dict, key: str):
    if key not in state:
        raise _Skipped("skipped: needs the reply of an earlier check, which failed")
    return state[key]


def _sampling(policy: HTTPPolicy, max_new_tokens: int, temperature: float,
              stop: tuple[str, ...] = ()) -> SamplingConfig:
    return SamplingConfig(max_new_tokens, temperature, 1.0, policy.sampling.max_prompt_tokens, stop=stop)


def _well_formed(g: Generation) -> str | None:
    if not g.token_ids:
        return "no output_ids"
    if len(g.logprobs) != len(g.token_ids):
        return f"{len(g.logprobs)} logprobs for {len(g.token_ids)} tokens"
    if g.finish_reason not in ("stop", "length"):
        return f"finish reason {g.finish_reason!r}"
    return None


def check_batch(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """Rollouts and judge votes: a batch of prompts, a seed each, tokens and their logprobs."""
    s = _sampling(policy, 16, 1.0)
    gens = policy.generate([NAME_COLOURS, LIST_FILES], sampling=s, seeds=[1, 2])
    problems = [p for g in gens if (p := _well_formed(g))]
    if problems:
        return "fail", "; ".join(problems)
    state["sampled"] = gens[0]
    return "ok", f"2 replies, {len(gens[0].token_ids)} and {len(gens[1].token_ids)} tokens"


def check_seed_replay(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """The proxy's `seed` and repeatable judge votes want a seed to replay its reply."""
    again = policy.generate([NAME_COLOURS], sampling=_sampling(policy, 16, 1.0), seeds=[1])[0]
    if again.token_ids == _needs(state, "sampled").token_ids:
        return "ok", "the same seed gave the same reply"
    return "warn", "the same seed gave another reply (SGLang: --enable-deterministic-inference)"


def check_scoring(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """OPD scores a sampled reply by its own ids (`max_new_tokens` 0, `logprob_start_len`); under the
    reply's own prompt that must give back the rollout's logprobs, token for token."""
    g = _needs(state, "sampled")
    (lps, _), = policy.score_many([(g.prompt_token_ids, g.token_ids)])
    gap = max(abs(a - b) for a, b in zip(lps, g.logprobs))
    seen = f"{len(lps)} tokens scored, largest gap to the rollout logprobs {gap:.4f}"
    return ("ok" if gap <= LOGPROB_TOLERANCE else "fail"), seen


def check_top_logprobs(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """Top-k OPD reads the teacher's k most likely tokens at each position of the reply."""
    g = _needs(state, "sampled")
    (lps, tops), = policy.score_many([(g.prompt_token_ids, g.token_ids)], top_k=5)
    if not tops or len(tops) != len(g.token_ids) or any(len(row) != 5 for row in tops):
        return "fail", f"rows: {None if not tops else [len(r) for r in tops][:8]}"
    bad = [i for i, (lp, row) in enumerate(zip(lps, tops))
           if any(a[0] < b[0] for a, b in zip(row, row[1:])) or lp > row[0][0] + LOGPROB_TOLERANCE]
    if bad:
        return "fail", f"rows not sorted, or the token above the top one, at {bad[:5]}"
    return "ok", f"{len(tops)} rows of 5, sorted"


def check_stream(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """The proxy streams replies: streamed and whole greedy replies must be the same tokens."""
    s = _sampling(policy, 24, 0.0)
    whole = policy.generate([LIST_FILES], sampling=s)[0]
    events = list(policy.stream(LIST_FILES, sampling=s))
    final = events[-1][1]
    if _well_formed(whole) is None:
        state["greedy"] = whole
    if final is None or final.token_ids != whole.token_ids or final.text != whole.text:
        return "fail", "the streamed reply differs from the whole one"
    if len(final.logprobs) != len(final.token_ids):
        return "fail", f"{len(final.logprobs)} logprobs for {len(final.token_ids)} tokens"
    return "ok", f"{len(events)} events, the same {len(whole.token_ids)} tokens"


def check_stop(policy: HTTPPolicy, state: dict) -> tuple[str, str]:
    """Agents end a reply on stop strings: generation must end at one, its tokens a prefix of the
    free reply's."""
    whole = _needs(state, "greedy")
    text = whole.text
    if len(text) < 12:
        return "warn", f"the greedy reply is too short to cut: {text!r}"
    stop = text[len(text) // 2: len(text) // 2 + 3]
    cut = policy.generate([LIST_FILES], sampling=_sampling(policy, 24, 0.0, (stop,)))[0]
    if cut.token_ids != whole.token_ids[:len(cut.token_ids)] or len(cut.token_ids) >= len(whole.token_ids):
        return "fail", f"stop {stop!r}: {len(cut.token_ids)} tokens, not a shorter prefix"
    return "ok", f"stop {stop!r} ended the reply after {len(cut.token_ids)} of {len(whole.token_ids)} tokens"


def check_weight_push(policy: HTTPPolicy, state: dict, weights: str) -> tuple[str, str]:
    """Training pushes each update with `/update_weights_from_disk`. Reloading the served model's own
    weights must keep its greedy reply; other weights may change it."""
    whole = _needs(state, "greedy")
    out = policy.update_weights_from_disk(weights)
    after = policy.generate([LIST_FILES], sampling=_sampling(policy, 24, 0.0))[0]
    said = str(out.get("message") or f"loaded {weights}").strip()[:160]
    if after.token_ids == whole.token_ids:
        return "ok", f"{said}; the same greedy reply after"
    return "warn", f"{said}; the greedy reply changed (fine if these are other weights)"


CHECKS: list[tuple[str, Callable[[HTTPPolicy, dict], tuple[str, str]]]] = [
    ("batch generate", check_batch), ("seeded replay", check_seed_replay),
    ("scoring = rollout logprobs", check_scoring), ("top-k logprobs", check_top_logprobs),
    ("streaming", check_stream), ("stop strings", check_stop)]


def run_checks(policy: HTTPPolicy, weights: str | None = None) -> list[Check]:
    """Every check in order (each returns its status and what it saw). One that raises fails with
    what it raised; those needing its reply are skipped as failed. `weights`: a model dir the server
    can read, to check the weight push with (it is loaded into the server)."""
    state: dict = {}
    out = []
    checks = list(CHECKS)
    if weights:
        checks.append(("weight push", lambda p, st: check_weight_push(p, st, weights)))
    for name, check in checks:
        try:
            out.append(Check(name, *check(policy, state)))
        except _Skipped as e:
            out.append(Check(name, "fail", str(e)))
        except Exception as e:  # the server's error, shown as the check's result
            out.append(Check(name, "fail", f"{type(e).__name__}: {str(e)[:300]}"))
    if not weights:
        out.append(Check("weight push", "skip", "not checked: give --weights DIR (a model dir the server "
                                                "can read; it is loaded into the server)"))
    return out


def main(argv: list[str]) -> int:
    from rich.table import Table

    from agents.factory import serve_policy
    from agents.serving.backend import BackendConfig
    from harness.reports.console import console
    from nextstate.config import compose, model_config, typed

    weights = None
    if "--weights" in argv:
        i = argv.index("--weights")
        if i + 1 >= len(argv):
            sys.exit("--weights needs a model dir the server can read")
        weights, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    cfg = compose(argv)
    backend = typed(cfg.backend, BackendConfig)
    with serve_policy(model_config(cfg.model), backend, cfg.paths.cache_dir) as policy:
        checks = run_checks(policy, weights)
    table = Table(title=f"backend {backend.name} at {policy.url}")
    for column in ("check", "status", "seen"):
        table.add_column(column)
    colour = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}
    for c in checks:
        table.add_row(c.name, f"[{colour[c.status]}]{c.status}[/]", c.seen)
    console().print(table)
    return 1 if any(c.status == "fail" for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
