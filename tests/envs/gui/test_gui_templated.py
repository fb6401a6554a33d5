"""The templated GUI suite: its instance list (distinct, disjoint splits, the sizes the grid needs) and,
in the real Chromium, that an instance is its seed (the listed goal and page on every reset), that the
oracle solves it through the env, and that each step's label says whether the solver would have
done the same there."""
import json
from collections import Counter

import pytest

from envs.gui.env import GUIEnv
from envs.gui.templated import MANIFEST, PAGES, load_templated, split_of, tree_digest, write_manifest

ROWS = json.loads(MANIFEST.read_text())["instances"]


def test_the_list_is_distinct_disjoint_and_large_enough():
    keys = [(r["page"], r["goal"], r["tree"]) for r in ROWS]
    assert len(set(keys)) == len(keys), [k for k, n in Counter(keys).items() if n > 1][:3]
    seeds = {"train": set(), "test": set()}
    for r in ROWS:
        assert r["split"] == split_of(r["page"], r["seed"])
        seeds[r["split"]].add((r["page"], r["seed"]))
    assert not seeds["train"] & seeds["test"]
    assert len(seeds["train"]) >= 200 and len(seeds["test"]) >= 100
    assert {r["page"] for r in ROWS} == set(PAGES)


def test_the_list_is_written_as_it_is_committed(tmp_path):
    """`python -m harness.gui_instances` rewrites the list: its writer gives the committed bytes."""
    write_manifest(json.loads(MANIFEST.read_text()), tmp_path / "list.json")
    assert (tmp_path / "list.json").read_text() == MANIFEST.read_text()


def test_a_prefix_of_a_split_holds_every_page():
    tasks = load_templated("train", 12, 0)
    assert [t.data["page"] for t in tasks] == list(PAGES) * 2
    assert all(t.split == "train" and t.instruction for t in tasks)
    with pytest.raises(ValueError, match="test instances"):
        load_templated("test", 0, 10_000)


@pytest.fixture(scope="module")
def env(env_config):
    e = GUIEnv(env_config("gui_templated", "env.templated_train=12", "env.templated_test=6"))
    yield e
    e.close()


@pytest.mark.chromium
def test_an_instance_is_its_seed(env):
    assert env.seed_shapes_episodes is False
    listed = {(r["page"], r["seed"]): r for r in ROWS}
    for task in env.tasks[:6]:
        for seed in (0, 1):
            env.reset(seed=seed, options={"task_id": task.task_id})
            row = listed[(task.data["page"], task.data["seed"])]
            assert (env.goal, tree_digest(env.page_tree)) == (row["goal"], row["tree"]), task.task_id


@pytest.mark.chromium
def test_the_oracle_solves_and_every_step_matches_the_solver(env):
    for task in env.tasks[:6]:
        env.reset(options={"task_id": task.task_id})
        labels, info = [], {}
        for reply in env.reference_actions(task):
            _, reward, terminated, _, info = env.step(reply)
            labels.append(info.get("step_label"))
            if terminated:
                break
        assert info["success"] and reward == 1.0, (task.task_id, info)
        assert labels and all(lab == {"matches_solver": True} for lab in labels), (task.task_id, labels)


@pytest.mark.chromium
def test_a_wrong_step_is_labelled_and_the_right_one_after_it_still_counts(env):
    task = next(t for t in env.tasks if t.data["page"] == "login-user")
    env.reset(options={"task_id": task.task_id})
    right = env.reference_actions(task)
    username_ref = right[0].split("(")[1].split(",")[0]
    _, _, _, _, info = env.step(f'type({username_ref}, "nobody")')
    assert info["step_label"] == {"matches_solver": False}
    for reply in ("click(e999)", "open the login page"):  # no such element; no action at all
        obs, _, terminated, _, info = env.step(reply)
        assert obs.startswith("[error]") and not terminated
        assert info["step_label"] == {"matches_solver": False}
    obs, _, _, _, info = env.step(right[0])
    assert info["step_label"] == {"matches_solver": True}
    # env=gui_templated reads the diff alone, focus moves left out: the typed name, no page again
    assert obs.splitlines()[1:] == [f"- textbox [ref={username_ref}]: nobody",
                                    f"+ textbox [ref={username_ref}]: {right[0].split(chr(34))[1]}"], obs
    _, reward, terminated, _, info = env.step("done()")
    assert terminated and reward == 0.0 and info["step_label"] == {"solved": False}
