"""Load on a real `mode=proxy` run: N concurrent sessions x M turns through its HTTP face,
each turn continuing its session's history (X-Session-Id, the X-Session-Token the first reply gave,
the key the proxy was started with), while the run judges and trains on them. A 503 during a weight
swap is retried after its Retry-After, as a client should, and counted apart: it is not an error.
Anything else that is not a 200 (a 409, a 500, a reset connection, a timeout) is.

  python benchmarks/proxy_load.py [--sessions 32] [--turns 3] [--max-new-tokens 16]

Prints p50/p95 latency of a turn (first try to its 200, retries included), errors and requests/s,
then one JSON line. The goal is 0 errors at 32 concurrent sessions on this machine."""
from __future__ import annotations

import argparse
import collections
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["Name a fruit.", "What is 2+2?", "Say hello in French.", "Name a colour.", "Give me a short word."]
FOLLOW_UPS = ["Please answer in one word.", "Shorter, please.", "Thanks. One more, different this time."]


def start_proxy(run_dir: Path, key: str, max_new_tokens: int, extra: list[str]) -> tuple[subprocess.Popen, str]:
    """A `mode=proxy` run serving until SIGTERM, and its URL once it serves (read from proxy.json)."""
    args = [sys.executable, "-m", "harness.run", "mode=proxy", "signal=opd", "hints=next_state",
            "mode.teacher=policy", "mode.port=0", "mode.iterations=0", f"model.max_new_tokens={max_new_tokens}",
            "progress=false", f"hydra.run.dir={run_dir}", *extra]
    env = dict(os.environ, NEXTSTATE_RESULTS=str(run_dir.parent), NEXTSTATE_PROXY_API_KEY=key)
    log = open(run_dir.parent / "proxy.out", "w")
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not (run_dir / "proxy.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"the proxy did not start:\n{(run_dir.parent / 'proxy.out').read_text()[-3000:]}")
        time.sleep(0.5)
    return proc, json.loads((run_dir / "proxy.json").read_text())["url"]


def stop_proxy(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(180)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors: collections.Counter[str] = collections.Counter()
        self.retried_503 = 0

    def add(self, **kw) -> None:
        with self.lock:
            if "latency" in kw:
                self.latencies.append(kw["latency"])
            if "error" in kw:
                self.errors[kw["error"]] += 1
            self.retried_503 += kw.get("retried", 0)


def run_session(url: str, key: str, i: int, turns: int, timeout_s: float, tally: Tally) -> None:
    """One user: `turns` main turns, each sent once its previous reply came back."""
    http = requests.Session()
    headers = {"Authorization": f"Bearer {key}", "X-Session-Id": f"load-{i}"}
    history = [{"role": "user", "content": f"{QUESTIONS[i % len(QUESTIONS)]} (user {i})"}]
    for turn in range(turns):
        t0, retried = time.monotonic(), 0
        while True:
            try:
                r = http.post(f"{url}/chat/completions", headers=headers, timeout=timeout_s,
                              json={"model": "any", "messages": history, "temperature": 1.0})
            except requests.RequestException as e:
                return tally.add(error=f"{type(e).__name__}: {str(e)[-90:]}", retried=retried)
            if r.status_code != 503:
                break
            retried += 1  # a weight swap: retry after the time it says
            time.sleep(float(r.headers.get("Retry-After", "1")))
        if r.status_code != 200:
            return tally.add(error=f"HTTP {r.status_code}: {r.text[:120]}", retried=retried)
        tally.add(latency=time.monotonic() - t0, retried=retried)
        headers["X-Session-Token"] = r.headers.get("X-Session-Token", headers.get("X-Session-Token", ""))
        reply = r.json()["choices"][0]["message"]
        history += [{"role": "assistant", "content": reply.get("content") or ""},
                    {"role": "user", "content": FOLLOW_UPS[turn % len(FOLLOW_UPS)]}]


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a client waits for one answer")
    ap.add_argument("overrides", nargs="*", help="more overrides for the proxy run (e.g. mode.batch_samples=8)")
    a = ap.parse_args()
    key = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="proxy_load_") as tmp:
        run_dir = Path(tmp) / "proxy"
        proc, url = start_proxy(run_dir, key, a.max_new_tokens, a.overrides)
        tally = Tally()
        try:
            t0 = time.monotonic()
            with ThreadPoolExecutor(a.sessions) as pool:
                list(pool.map(lambda i: run_session(url, key, i, a.turns, a.timeout, tally), range(a.sessions)))
            wall = time.monotonic() - t0
            stats = requests.get(url.removesuffix("/v1") + "/health", timeout=10).json()
        finally:
            rc = stop_proxy(proc)
        out = (Path(tmp) / "proxy.out").read_text()
    updates = out.count("[proxy] update ")
    if tally.errors:  # what the proxy said about them
        print("\n".join([line for line in out.splitlines() if "rror" in line or "Traceback" in line][-20:]))
    errors = sum(tally.errors.values())
    p50, p95 = percentile(tally.latencies, 50), percentile(tally.latencies, 95)
    print(f"{a.sessions} sessions x {a.turns} turns, max_new_tokens {a.max_new_tokens}: "
          f"{len(tally.latencies)} answered in {wall:.1f}s ({len(tally.latencies) / wall:.2f} requests/s)")
    print(f"latency p50 {p50:.2f}s  p95 {p95:.2f}s  max {max(tally.latencies, default=float('nan')):.2f}s")
    print(f"errors {errors} {dict(tally.errors)}; 503s retried (weight swaps) {tally.retried_503}; "
          f"updates during the load {updates}; proxy stats {stats}; the proxy exited with {rc} on SIGTERM")
    rate = len(tally.latencies) / wall
    print(json.dumps({"metric": "proxy_load_errors", "value": errors, "target": 0, "higher_is_better": False,
                      "p50_s": round(p50, 3), "p95_s": round(p95, 3), "requests_per_s": round(rate, 3),
                      "retried_503": tally.retried_503, "updates": updates, "sessions": a.sessions, "turns": a.turns}))


if __name__ == "__main__":
    main()
