"""The `templated` GUI suite (`env=gui env.suite=templated`): MiniWoB instances a small model can learn.

A 135M model learns with RL only where reward is within reach, and it needs many distinct instances to
learn a skill rather than a few answers. So the suite is the single- and few-step MiniWoB pages that
have a scripted solver (`envs/gui/solvers.py`: one click, typing then a click, a login), and an
instance is one page at one seed: MiniWoB draws the page's content from `Math.seedrandom(seed)`, so a
(page, seed) pair is the same goal and the same page on every reset, for every rollout of a group.

The instances are listed in `templated_instances.json` beside this file (page, seed, split, the goal
the page drew and a digest of its first accessibility tree), made once with the real browser by
`python -m harness.gui_instances`: seeds are drawn in turn per page, a seed goes to test or train by a
hash of (page, seed), and a candidate whose goal and tree were already drawn, in either split, is
skipped, as is one the solver needs more than 3 actions for (click-checkboxes with 3-5 boxes to
tick: its prompts would pass 400 tokens); so no two instances read the same, and train and test share
none. The goal is what a MiniWoB page generates in JavaScript, so it can only be known by opening the
page: hence the list.

Each step of a templated episode carries a verifiable label (`matches_solver`): the solver, run on
the page the agent saw and on the steps that matched it so far, would have done the same action;
`done()` is labelled by whether the page was solved. The oracle judge votes from these labels.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from envs.base import set_tasks
from nextstate.types import Task

# Pages with a scripted solver whose instances differ by their goal: click-test and focus-text draw
# one goal ("Click the button.") for every seed, so they are not here.
PAGES = ("click-button", "click-link", "enter-text", "enter-password", "login-user", "click-checkboxes")
# (train, test) instances per page: enter-text draws its goal from 50 names and its tree shows no
# positions, so it has at most 50 distinct instances.
QUOTA = {"click-button": (42, 21), "click-link": (42, 21), "enter-text": (30, 15),
         "enter-password": (42, 21), "login-user": (42, 21), "click-checkboxes": (42, 21)}
TEST_SHARE = 3  # one seed in 3 is a test seed
MAX_ACTIONS = 3  # the solver's actions an instance may need: longer episodes make prompts over 400 tokens
MANIFEST = Path(__file__).with_name("templated_instances.json")


def _digest(*parts) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts).encode()).digest()[:8], "big")


def split_of(page: str, seed: int) -> str:
    """A seed belongs to one split for good: the split is a function of (page, seed)."""
    return "test" if _digest(page, seed) % TEST_SHARE == 0 else "train"


def tree_digest(tree: str) -> str:
    return hashlib.sha256(tree.encode()).hexdigest()[:16]


def instance(page: str, seed: int, split: str, goal: str) -> Task:
    return Task(task_id=f"{page}-{seed}", env="gui", split=split, tags=("templated", page),
                instruction=goal,
                data={"suite": "miniwob", "path": f"miniwob/{page}.html", "flight": False,
                      "page": page, "seed": seed, "templated": True})


def load_templated(split: str | None, n_train: int, n_test: int, manifest: Path = MANIFEST) -> list[Task]:
    """The first `n_train` train and `n_test` test instances of the list, pages in turn (so any prefix
    holds every page alike); `split=None` gives both."""
    if not manifest.exists():
        raise FileNotFoundError(f"{manifest} is missing: make it with `python -m harness.gui_instances`")
    rows = json.loads(manifest.read_text())["instances"]
    out: list[Task] = []
    for name, n in (("train", n_train), ("test", n_test)):
        if split not in (None, name):
            continue
        by_page = {p: [r for r in rows if r["split"] == name and r["page"] == p] for p in PAGES}
        have = sum(len(v) for v in by_page.values())
        if n > have:
            raise ValueError(f"the templated GUI suite has {have} {name} instances; {n} were asked for")
        ordered = [r for i in range(max(map(len, by_page.values()))) for p in PAGES
                   if i < len(by_page[p]) for r in [by_page[p][i]]]
        out += [instance(r["page"], r["seed"], name, r["goal"]) for r in ordered[:n]]
    return out


def build_manifest(env, quota: dict[str, tuple[int, int]] = QUOTA, max_seed: int = 1000,
                   progress=None) -> dict:
    """Open pages seed after seed in the real browser until every page has its train and test
    instances, skipping a (goal, tree) already drawn and an instance whose solver needs more than
    MAX_ACTIONS actions; returns the manifest."""
    rows, seen = [], set()
    for page, (n_train, n_test) in quota.items():
        need = {"train": n_train, "test": n_test}
        for seed in range(max_seed):
            if not any(need.values()):
                break
            split = split_of(page, seed)
            if not need[split]:
                continue
            set_tasks(env, [instance(page, seed, split, "")], "no probe")
            _, info = env.reset(options={"task_id": f"{page}-{seed}"})
            if info.get("infra_failure"):
                raise RuntimeError(f"{page} seed {seed} did not open: {info.get('infra_reason')}")
            key = (page, env.goal, tree_digest(env.page_tree))
            if key in seen:
                continue
            actions = len(env.reference_actions(env.tasks[0])) - 1  # the list ends with done()
            if not 1 <= actions <= MAX_ACTIONS:
                continue
            seen.add(key)
            need[split] -= 1
            rows.append({"page": page, "seed": seed, "split": split, "goal": env.goal, "tree": key[2],
                         "actions": actions})
            if progress is not None:
                progress(page, seed, split)
        if any(need.values()):
            raise RuntimeError(f"{page}: {need} instances still missing after {max_seed} seeds")
    return {"pages": list(PAGES), "instances": rows}


def write_manifest(manifest: dict, path: Path = MANIFEST) -> None:
    """Atomically, one instance a line (readable diffs)."""
    tmp = path.with_suffix(".tmp")
    rows = ",\n".join(json.dumps(r) for r in manifest["instances"])
    tmp.write_text(f'{{"pages": {json.dumps(manifest["pages"])},\n"instances": [\n{rows}\n]}}\n')
    os.replace(tmp, path)
