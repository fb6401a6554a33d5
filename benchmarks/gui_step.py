"""GUI env step and reset latency vs the `miniwob` package's own Gymnasium env (Selenium driving
Debian's chromedriver), on the same MiniWoB tasks, solved the same way, in one run.

Both sides record a screenshot per state (miniwob does by default; ours writes PNGs to a temp
dir) and read the page after every action (miniwob: its DOM + screenshot; ours: the accessibility
tree + screenshot + the tree diff). Episodes run in alternating blocks so machine noise hits both
alike; resets of the same task in a row are what a GRPO group does.

Two paces, both reported: agent-paced (the "agent" thinks `--think` seconds before each action,
untimed on both sides; a 135M model on this CPU needs >= 1 s per action, so 0.5 s is generous to
miniwob) and back-to-back. Ours opens a fresh browser context per episode, which costs a renderer
process and a page load; it prewarms the next one while the agent thinks, so only the agent-paced
reset finds it ready. The JSON line's value is the worse of the agent-paced reset and step ratios
(ours / miniwob; target <= 1.0); the back-to-back ratios ride along.

Needs `chromium-driver` (make bench installs it).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.gui.a11y import parse_tree  # noqa: E402
from envs.gui.env import GUIEnv, GUIEnvConfig  # noqa: E402
from envs.gui.solvers import MINIWOB_SOLVERS  # noqa: E402
from nextstate.config import compose, typed  # noqa: E402

TASKS = ["click-checkboxes", "login-user", "enter-text", "click-button"]


def _quoted(s: str) -> list[str]:
    return re.findall(r'"([^"]*)"', s)


def miniwob_plan(task: str, obs: dict) -> list[tuple[str, dict]]:
    """The same solution as our solvers, in miniwob's action space (by its DOM refs)."""
    els, goal = obs["dom_elements"], obs["utterance"]
    by = lambda tag: [e for e in els if e["tag"] == tag]  # noqa: E731
    if task == "click-checkboxes":
        m = re.match(r"Select (.*) and click Submit\.", goal)
        wanted = set() if m.group(1) == "nothing" else set(m.group(1).split(", "))
        names = {e["parent"]: e["text"] for e in els if e["tag"] == "t"}
        plan = [("CLICK_ELEMENT", {"ref": e["ref"]}) for e in by("input_checkbox") if names.get(e["parent"]) in wanted]
        return plan + [("CLICK_ELEMENT", {"ref": by("button")[0]["ref"]})]
    if task == "login-user":
        user, pw = _quoted(goal)[:2]
        return [("FOCUS_ELEMENT_AND_TYPE_TEXT", {"ref": by("input_text")[0]["ref"], "text": user}),
                ("FOCUS_ELEMENT_AND_TYPE_TEXT", {"ref": by("input_password")[0]["ref"], "text": pw}),
                ("CLICK_ELEMENT", {"ref": by("button")[0]["ref"]})]
    if task == "enter-text":
        return [("FOCUS_ELEMENT_AND_TYPE_TEXT", {"ref": by("input_text")[0]["ref"], "text": _quoted(goal)[0]}),
                ("CLICK_ELEMENT", {"ref": by("button")[0]["ref"]})]
    if task == "click-button":
        target = _quoted(goal)[0]
        return [("CLICK_ELEMENT", {"ref": next(e["ref"] for e in by("button") if e["text"] == target)})]
    raise KeyError(task)


def run_miniwob(env, task: str, seed: int, resets: list, steps: list, think: float) -> float:
    t = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    resets.append(time.perf_counter() - t)
    reward = 0.0
    for kind, kw in miniwob_plan(task, obs):
        action = env.unwrapped.create_action(kind, **kw)
        time.sleep(think)
        t = time.perf_counter()
        obs, reward, terminated, _, _ = env.step(action)
        steps.append(time.perf_counter() - t)
        if terminated:
            break
    return reward


def run_ours(env: GUIEnv, task: str, seed: int, resets: list, steps: list, think: float) -> float:
    t = time.perf_counter()
    env.reset(seed=seed, options={"task_id": task})
    resets.append(time.perf_counter() - t)
    solver, history, reward = MINIWOB_SOLVERS[task], [], 0.0
    while (reply := solver(env.goal, parse_tree(env.page_tree), history)) is not None:
        time.sleep(think)
        t = time.perf_counter()
        _, reward, terminated, _, info = env.step(reply)
        steps.append(time.perf_counter() - t)
        assert not info.get("infra_failure"), info
        history.append(reply)
        if terminated:
            break
    return reward


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def measure(ours: GUIEnv, theirs_of: dict, think: float, episodes: int, block: int) -> dict:
    """Per task: `episodes` episodes on each side, in alternating blocks of `block`."""
    out = {}
    for task in TASKS:
        theirs = theirs_of[task]
        r = {"ours_reset": [], "ours_step": [], "mw_reset": [], "mw_step": [], "ours_ok": 0, "mw_ok": 0}
        for start in range(0, episodes, block):
            for seed in range(start, start + block):
                r["ours_ok"] += run_ours(ours, task, seed, r["ours_reset"], r["ours_step"], think) >= 1.0
            for seed in range(start, start + block):
                r["mw_ok"] += run_miniwob(theirs, task, seed, r["mw_reset"], r["mw_step"], think) > 0
        out[task] = r
        print(f"  {task:18s} reset {med(r['ours_reset']):6.1f} vs {med(r['mw_reset']):6.1f} ms "
              f"({med(r['ours_reset']) / med(r['mw_reset']):.2f}x)   step {med(r['ours_step']):6.1f} vs "
              f"{med(r['mw_step']):6.1f} ms ({med(r['ours_step']) / med(r['mw_step']):.2f}x)   "
              f"solved {r['ours_ok']}/{episodes} vs {r['mw_ok']}/{episodes}")
    pool = lambda k: [x for r in out.values() for x in r[k]]  # noqa: E731
    res = {k: med(pool(k)) for k in ("ours_reset", "mw_reset", "ours_step", "mw_step")}
    res["reset_ratio"] = res["ours_reset"] / res["mw_reset"]
    res["step_ratio"] = res["ours_step"] / res["mw_step"]
    print(f"  all: reset {res['ours_reset']:.1f} vs {res['mw_reset']:.1f} ms ({res['reset_ratio']:.2f}x), "
          f"step {res['ours_step']:.1f} vs {res['mw_step']:.1f} ms ({res['step_ratio']:.2f}x)")
    return res


def main(think: float, overrides: list[str], episodes: int = 6, block: int = 3) -> None:
    os.environ.setdefault("MINIWOB_CHROME_BINARY", "/usr/bin/chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", "/usr/bin/chromedriver")
    import gymnasium as gym
    import miniwob

    gym.register_envs(miniwob)
    cfg = typed(compose(["env=gui", "env.suite=miniwob", *overrides]).env, GUIEnvConfig)
    with tempfile.TemporaryDirectory() as shots:
        ours = GUIEnv(cfg, output_dir=shots)
        theirs_of = {t: gym.make(f"miniwob/{t}-v1") for t in TASKS}
        try:
            for task in TASKS:  # warm-up (first loads, caches) on both sides
                run_ours(ours, task, 10_000, [], [], 0.0)
                run_miniwob(theirs_of[task], task, 10_000, [], [], 0.0)
            print(f"agent-paced ({think:.2f} s of thinking before each action, untimed, both sides):")
            paced = measure(ours, theirs_of, think, episodes, block)
            print("back-to-back (no thinking time: ours cannot prewarm the next context):")
            b2b = measure(ours, theirs_of, 0.0, episodes, block)
        finally:
            ours.close()
            for env in theirs_of.values():
                env.close()
    worst = max(paced["reset_ratio"], paced["step_ratio"])
    print(f"headline (agent-paced): worse of reset/step ratio {worst:.2f}x; target <= 1.0x")
    print(json.dumps({"metric": "gui_latency_ratio_vs_miniwob_selenium", "value": round(worst, 3), "target": 1.0,
                      "higher_is_better": False, "think_s": think,
                      "reset_ratio": round(paced["reset_ratio"], 3), "step_ratio": round(paced["step_ratio"], 3),
                      "ours_reset_ms": round(paced["ours_reset"], 1), "miniwob_reset_ms": round(paced["mw_reset"], 1),
                      "ours_step_ms": round(paced["ours_step"], 1), "miniwob_step_ms": round(paced["mw_step"], 1),
                      "back_to_back_reset_ratio": round(b2b["reset_ratio"], 3),
                      "back_to_back_step_ratio": round(b2b["step_ratio"], 3)}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--think", type=float, default=0.5,
                    help="seconds the 'agent' thinks before each action (untimed; both envs alike)")
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. env.prewarm=false")
    args = ap.parse_args()
    main(args.think, args.overrides)
