"""Grading one SWE instance: this env's grader vs swebench's own harness
(`swebench.harness.run_evaluation.run_instance`), on the same image, in one run, interleaved.

Both apply the same patch to a fresh container, run the same eval script and decide with the same
swebench functions; the verdicts and per-test reports must be identical. Our time includes waiting
for the container's removal (we normally remove it in the background), so the ratio is
conservative. swebench's time is dominated by `docker stop --time=15` on a pid 1 that ignores
SIGTERM; its share is printed from swebench's own log. Ends with one JSON line.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.sandbox import SandboxConfig, docker_client, wait_for_background_removals  # noqa: E402
from envs.swe.env import SWEEnv, SWEEnvConfig  # noqa: E402
from envs.swe.grading import grade_patch  # noqa: E402
from nextstate.config import compose, typed  # noqa: E402


def wrong_patch(task, tmp: Path) -> str:
    """A change to the file the gold patch fixes that fixes nothing: applies, tests run, unresolved."""
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", task.data["build"]["bundle"], str(repo)], check=True)
    path = repo / re.search(r"^--- a/(.*)$", task.data["instance"]["patch"], re.M).group(1)
    path.write_text(path.read_text() + "\n\ndef _unrelated():\n    return None\n")
    return subprocess.run(["git", "-C", str(repo), "diff"], capture_output=True, text=True, check=True).stdout


def swebench_stop_seconds(log: Path) -> float:
    stamps = {}
    for line in log.read_text().splitlines():
        for key, marker in (("start", "Attempting to stop container"), ("end", "removed successfully")):
            if marker in line:
                stamps[key] = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return (stamps["end"] - stamps["start"]).total_seconds() if len(stamps) == 2 else float("nan")


def main(instance_id: str, rounds: int) -> None:
    cfg = compose(["env=swe"])
    env = SWEEnv(typed(cfg.env, SWEEnvConfig), typed(cfg.sandbox, SandboxConfig), split=None,
                 run_id="bench-swe")
    task = env._by_id[instance_id]
    image = env.image_for(task)
    inst = task.data["instance"]
    client = docker_client()

    from swebench.harness.run_evaluation import run_instance
    from swebench.harness.utils import make_test_spec

    spec = make_test_spec(inst)
    workdir = Path(tempfile.mkdtemp(prefix="nextstate-bench-swe-"))
    patches = {"gold": inst["patch"], "wrong": wrong_patch(task, workdir)}
    os.chdir(workdir)  # swebench writes logs/ under the working directory
    grade_patch(image, inst, "", sandbox=env.sandbox_config, run_id="bench-swe", client=client)  # warm-up
    wait_for_background_removals()

    ours, theirs, stops, same = [], [], [], True
    for i in range(rounds):
        kind = "gold" if i % 2 == 0 else "wrong"
        t = time.perf_counter()
        mine = grade_patch(image, inst, patches[kind], sandbox=env.sandbox_config, run_id="bench-swe",
                           client=client)
        wait_for_background_removals()  # count our container's removal too
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        _, report = run_instance(spec, {"instance_id": instance_id, "model_patch": patches[kind],
                                        "model_name_or_path": kind}, client, f"bench-{i}", 600)
        theirs.append(time.perf_counter() - t)
        stops.append(swebench_stop_seconds(workdir / "logs" / "run_evaluation" / f"bench-{i}" / kind /
                                           instance_id / "run_instance.log"))
        r = report[instance_id]
        agree = (mine.resolved == r["resolved"] and mine.tests_status == r["tests_status"]
                 and mine.resolved == (kind == "gold"))
        same &= agree
        if not agree:  # keep both sides' evidence
            (workdir / f"disagreement-{i}.json").write_text(json.dumps(
                {"ours": mine.to_dict(), "swebench": r, "kind": kind}, indent=1))
            print(f"  evidence: {workdir / f'disagreement-{i}.json'}")
        print(f"round {i} ({kind:5s}): ours {ours[-1]:6.2f} s  swebench {theirs[-1]:6.2f} s "
              f"(its container stop {stops[-1]:5.2f} s)  resolved {mine.resolved}/{r['resolved']}  "
              f"{'same verdict and tests' if agree else 'DIFFERENT'}")
    env.close()
    o, s = statistics.median(ours), statistics.median(theirs)
    speedup = s / o
    stop = statistics.median(stops)
    print(f"median: ours {o:.2f} s, swebench harness {s:.2f} s -> {speedup:.1f}x faster (target >= 8x); "
          f"verdicts identical: {same}")
    print(f"best of {rounds}: ours {min(ours):.2f} s, swebench {min(theirs):.2f} s -> "
          f"{min(theirs) / min(ours):.1f}x (the machine is shared: the median is the headline)")
    print(f"swebench without its container stop: {s - stop:.2f} s -> {(s - stop) / o:.1f}x")
    print(json.dumps({"metric": "swe_grading_speedup_vs_swebench_harness", "value": round(speedup, 2),
                      "target": 8.0, "higher_is_better": True, "ours_s": round(o, 3), "swebench_s": round(s, 3),
                      "swebench_stop_s": round(stop, 3), "best_of_n_speedup": round(min(theirs) / min(ours), 2),
                      "verdicts_identical": same, "instance": instance_id,
                      "rounds": rounds}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instance", default="nextstate__textkit-3")
    ap.add_argument("--rounds", type=int, default=6)
    a = ap.parse_args()
    main(a.instance, a.rounds)
