"""The SWE env end to end, with real Docker and swebench's grading: every bundled instance is
resolved by its gold patch (sent through the env's own edit actions) and not by an empty patch;
the agent cannot change the tests that grade it; edit actions; infra failures; limits; check_env;
the CLI."""

import pytest

import envs  # noqa: F401
from agents.base import NoopAgent, OracleAgent, ReplayAgent
from agents.rollout import run_episode
from envs.limits import EpisodeLimits
from envs.swe.actions import render_replace, render_shell, render_write
from envs.swe.env import SWEEnv, SWEEnvConfig
from envs.swe.grading import grade_patch
from envs.swe.instances import load_swe_suite
from nextstate.types import Task
from tests.paths import ROOT
from tests.sampling import spread

pytestmark = pytest.mark.docker
SUITE = load_swe_suite(ROOT / "envs" / "tasks" / "swe" / "instances.jsonl")
BY_ID = {t.task_id: t for t in SUITE}


@pytest.fixture(scope="module")
def swe_config(env_config) -> SWEEnvConfig:
    return env_config("swe")


@pytest.fixture(scope="module")
def env(swe_config, sandbox_config, docker):
    e = SWEEnv(swe_config, sandbox_config, tasks=SUITE, run_id="pytest-swe")
    e.prepare()
    yield e
    e.close()


def episode(env, cfg, replies, task_id):
    return run_episode(env, ReplayAgent(replies, then="SUBMIT"), BY_ID[task_id], cfg.system_prompt)


@pytest.mark.parametrize("task", spread(SUITE, lambda t: t.task_id))
def test_gold_patch_resolves(env, swe_config, task):
    traj = run_episode(env, OracleAgent(), task, swe_config.system_prompt)
    assert not traj.infra_failure, traj.infra_reason
    assert traj.success and traj.outcome == 1.0 and traj.terminated, traj.info.get("test_output")
    assert all(s.next_state.kind == "tool" and "[edit failed]" not in s.next_state.text
               for s in traj.steps[:-1])
    final = traj.steps[-1].next_state
    assert final.kind == "test" and final.fields["resolved"] and "Resolved: yes." in final.text
    status = final.fields["tests_status"]
    assert not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"]


@pytest.mark.parametrize("task", spread(SUITE, lambda t: t.task_id))
def test_empty_patch_does_not_resolve(env, swe_config, task):
    traj = run_episode(env, NoopAgent(), task, swe_config.system_prompt)
    assert not traj.infra_failure and not traj.success and traj.outcome == 0.0
    status = traj.steps[-1].next_state.fields["tests_status"]
    # the instance is valid: its FAIL_TO_PASS tests really fail without a fix, P2P really pass
    assert sorted(status["FAIL_TO_PASS"]["failure"]) == sorted(task.data["instance"]["FAIL_TO_PASS"])
    assert not status["PASS_TO_PASS"]["failure"]


# -- the agent cannot change the tests that grade it ------------------------------------------------
TASK = "nextstate__textkit-3"
FORCE_PASS = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
'''


def test_hidden_tests_and_the_fix_are_not_in_the_agent_container(env, swe_config):
    traj = episode(env, swe_config, [
        render_shell("grep -rn 'acronyms' /testbed --include=*.py; echo found=$?"),
        render_shell("git log --all --oneline | wc -l; git rev-parse HEAD"),
    ], TASK)
    assert "found=1" in traj.steps[0].next_state.text
    inst = BY_ID[TASK].data["instance"]
    assert inst["base_commit"] in traj.steps[1].next_state.text  # HEAD is the base, nothing later


def test_rewritten_tests_and_a_conftest_are_dropped_before_grading(env, swe_config):
    fake_tests = ("def test_camel_to_snake_acronyms():\n    pass\n\n\n"
                  "def test_camel_to_snake_trailing_acronym():\n    pass\n")
    traj = episode(env, swe_config, [
        render_write("tests/test_case.py", fake_tests),
        render_write("conftest.py", FORCE_PASS),
        render_shell("python3 -m pytest -q tests 2>&1 | tail -1"),  # in the agent's own tree it "works"
        "SUBMIT",
    ], TASK)
    assert "passed" in traj.steps[2].next_state.text and "failed" not in traj.steps[2].next_state.text
    final = traj.steps[-1].next_state
    assert not traj.success and final.fields["dropped_test_files"] == ["conftest.py", "tests/test_case.py"]
    assert "were dropped" in final.text
    # the conftest alone would have fooled the grader: the dropping is what protects it
    lines = FORCE_PASS.splitlines()
    raw = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
           f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))
    res = grade_patch(env.image_for(BY_ID[TASK]), BY_ID[TASK].data["instance"], raw,
                      sandbox=env.sandbox_config, run_id="pytest-swe", client=env._docker())
    assert res.patch_successfully_applied and res.resolved


def test_test_changes_are_dropped_but_the_fix_still_counts(env, swe_config):
    oracle = env.reference_actions(BY_ID[TASK])[:-1]
    traj = episode(env, swe_config, [
        render_write("tests/test_case.py", "def test_nothing():\n    assert False\n"),
        *oracle,
        render_shell("git add -A && git commit -qm 'my fix'"),  # committed work counts too
        "SUBMIT",
    ], TASK)
    assert traj.success, traj.info.get("test_output")
    assert traj.steps[-1].next_state.fields["dropped_test_files"] == ["tests/test_case.py"]


def test_a_background_job_cannot_reach_the_grading_run(env, swe_config):
    """A job that would break the fix a moment after SUBMIT: it is killed before the diff is
    taken, and the tests run in another container anyway."""
    oracle = env.reference_actions(BY_ID[TASK])[:-1]
    traj = episode(env, swe_config, [
        *oracle,
        render_shell("(sleep 1; echo 'raise SystemExit(1)' > /testbed/textkit/case.py) > /dev/null 2>&1 &"),
        "SUBMIT",
    ], TASK)
    assert traj.success and not traj.infra_failure


# -- edit actions ----------------------------------------------------------------------------------
def test_edits_show_diffs_keep_modes_and_fail_safely(env):
    env.reset(options={"task_id": TASK})
    obs, reward, term, trunc, info = env.step(render_shell("chmod +x textkit/case.py && cd textkit"))
    assert "[exit code 0] [cwd /testbed/textkit]" in obs and info["step_label"] == {"exit_ok": True}
    # relative to the shell's cwd; the file keeps its mode; the next state is the diff
    obs, *_, info = env.step(render_replace("case.py", [('"""Identifier case conversions."""\n',
                                                         '"""Identifier case conversions (edited)."""\n')]))
    assert info["next_state"].kind == "tool" and info["step_label"] == {"edit_ok": True}
    assert obs.startswith("Edited /testbed/textkit/case.py")
    assert '+"""Identifier case conversions (edited)' in obs
    assert env.step(render_shell("stat -c %A case.py"))[0].splitlines()[1] == "-rwxr-xr-x"
    # not found, ambiguous: nothing changes, later blocks are skipped
    miss = render_replace("case.py", [("no such text\n", "x\n")])
    obs, *_, info = env.step(miss + "\n" + render_shell("touch /tmp/should-not-exist"))
    assert "[edit failed]" in obs and "not found" in obs and "not run" in obs
    assert info["step_label"] == {"edit_ok": False}
    obs, *_ = env.step(render_replace("case.py", [("import re\n", "import re  # x\n"), ("\n\n", "\n")]))
    assert "occurs" in obs and "times" in obs
    assert "No such file" in env.step(render_shell("ls /tmp/should-not-exist"))[0]
    assert "whitespace" in env.step(render_replace("case.py", [("import   re\n", "import re\n")]))[0]
    # write: a new file in a new directory; a missing file cannot be edited
    obs, *_ = env.step(render_write("/testbed/pkg/sub/new.py", "X = 1\n"))
    assert obs.startswith("Created /testbed/pkg/sub/new.py (1 lines)") and "+X = 1" in obs
    assert "does not exist" in env.step(render_replace("nope.py", [("a\n", "b\n")]))[0]
    assert "is a directory" in env.step(render_write("/testbed/pkg", "x\n"))[0]
    obs, reward, term, trunc, info = env.step("SUBMIT")
    assert term and reward == 0.0 and "pkg/sub/new.py" in info["model_patch"]


def test_bad_replies_are_error_next_states(env):
    env.reset(options={"task_id": TASK})
    for junk in ["", "\x00\x01\x02\x03", "I would edit the file\nif I could"]:
        obs, reward, terminated, truncated, info = env.step(junk)
        assert obs.startswith("[error]") and info["next_state"].kind == "error"
        assert reward == 0.0 and not terminated and not truncated


# -- infrastructure, limits, Gymnasium, CLI ----------------------------------------------------------
def test_dead_container_is_an_infra_failure_not_a_zero(env, docker):
    env.reset(options={"task_id": TASK})
    docker.containers.get(env._sandbox.container_id).kill()
    obs, reward, terminated, truncated, info = env.step(render_shell("ls"))
    assert info["infra_failure"] and terminated and "infrastructure failure" in obs
    _, info = env.reset(options={"task_id": TASK})  # and the next episode works
    assert not info.get("infra_failure") and "[exit code 0]" in env.step(render_shell("true"))[0]


def test_container_dying_before_submit_is_infra_but_breaking_git_is_the_agents_doing(env, docker):
    env.reset(options={"task_id": TASK})
    docker.containers.get(env._sandbox.container_id).kill()
    _, reward, terminated, _, info = env.step("SUBMIT")
    assert info["infra_failure"] and terminated and reward == 0.0
    env.reset(options={"task_id": TASK})
    obs, reward, terminated, _, info = env.step(render_shell("rm -rf .git") + "\nSUBMIT")
    assert terminated and reward == 0.0 and not info.get("infra_failure")
    assert "could not take the diff" in obs and not info["patch_exists"]


def _patch_prepending(line: str) -> str:
    """A patch that puts `line` at the top of textkit/case.py (the TASK's source file)."""
    return ("diff --git a/textkit/case.py b/textkit/case.py\n--- a/textkit/case.py\n+++ b/textkit/case.py\n"
            f"@@ -1,2 +1,3 @@\n+{line}\n \"\"\"Identifier case conversions.\"\"\"\n import re\n")


def test_a_grading_container_that_dies_is_an_infra_failure(env, docker):
    import threading
    import time

    task = BY_ID[TASK]
    run_id = "pytest-swe-killed"

    def kill_when_up():
        for _ in range(300):
            for c in docker.containers.list(filters={"label": f"nextstate.run={run_id}"}):
                time.sleep(1.0)  # the tests are running (the patch makes them sleep)
                c.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_up)
    killer.start()
    res = grade_patch(env.image_for(task), task.data["instance"],
                      _patch_prepending("import time; time.sleep(8)"), sandbox=env.sandbox_config,
                      run_id=run_id, client=docker)
    killer.join()
    assert res.infra_failure and not res.resolved, res.test_output[-500:]


def test_a_patch_that_cuts_its_own_tests_short_is_graded_not_infra(env, docker):
    task = BY_ID[TASK]
    res = grade_patch(env.image_for(task), task.data["instance"],
                      _patch_prepending("import os, signal; os.kill(os.getppid(), signal.SIGKILL)"),
                      sandbox=env.sandbox_config, run_id="pytest-swe", client=docker)
    assert not res.infra_failure and not res.resolved and res.retried


def test_an_image_that_is_not_here_is_an_infra_failure(swe_config, sandbox_config, docker):
    t = BY_ID[TASK]
    ghost = Task(task_id="nextstate__ghost-1", env="swe", instruction="x", data={
        "instance": dict(t.data["instance"], instance_id="nextstate__ghost-1",
                         image="swebench/sweb.eval.x86_64.nextstate_1776_ghost-1:latest"), "build": None})
    e = SWEEnv(swe_config, sandbox_config, tasks=[ghost], run_id="pytest-swe-ghost")
    try:
        _, info = e.reset(options={"task_id": ghost.task_id})
        assert info["infra_failure"] and "not here" in info["infra_reason"]
        _, reward, terminated, _, info = e.step("SUBMIT")
        assert info["infra_failure"] and terminated and reward == 0.0
    finally:
        e.close()


def test_a_swebench_task_repo_builds_with_the_legacy_builder(tmp_path, swe_config, sandbox_config, env):
    """A task repo in swebench 5.x's layout whose Dockerfile uses a BuildKit heredoc."""
    import json
    import shutil

    import yaml

    task = BY_ID[TASK]
    inst = task.data["instance"]
    d = tmp_path / "tasks" / "nextstate__textkit-3r"
    d.mkdir(parents=True)
    (tmp_path / "sweb.yaml").write_text("datasets: [mine]\nsplits: [test]\n")
    meta = {k: inst[k] for k in ("repo", "version", "base_commit", "log_parser", "eval_type")}
    (d / "task.yaml").write_text(yaml.safe_dump(dict(
        meta, instance_id=d.name, split="test", datasets=["mine"],
        image=f"swebench/sweb.eval.x86_64.{d.name.replace('__', '_1776_')}:latest")))
    (d / "tests.json").write_text(json.dumps({k: inst[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}))
    for key, name in (("patch", "gold.patch"), ("test_patch", "test.patch"), ("eval_script", "eval.sh"),
                      ("problem_statement", "problem_statement.md")):
        (d / name).write_text(inst[key])
    shutil.copyfile(task.data["build"]["bundle"], d / "repo.bundle")
    (d / "Dockerfile").write_text(
        "FROM nextstate/swe:latest\nCOPY repo.bundle /tmp/repo.bundle\nRUN <<EOF_5f3a\n#!/bin/bash\n"
        "set -euxo pipefail\ngit clone -q /tmp/repo.bundle /testbed\ncd /testbed\ngit remote remove origin\n"
        "EOF_5f3a\nWORKDIR /testbed\n")
    e = SWEEnv(swe_config, sandbox_config, tasks=load_swe_suite(tmp_path), run_id="pytest-swe-taskrepo")
    try:
        (t,) = e.tasks
        traj = run_episode(e, OracleAgent(), t, swe_config.system_prompt)
        assert traj.success and not traj.infra_failure, traj.infra_reason or traj.info.get("test_output")
    finally:
        e.close()


def test_max_steps_truncates_and_still_grades(env, swe_config):
    task = BY_ID[TASK]
    replies = env.reference_actions(task)[:-1]
    limited = EpisodeLimits(env, max_steps=len(replies))
    traj = run_episode(limited, ReplayAgent(replies + ["SUBMIT"]), task, swe_config.system_prompt)
    assert traj.truncated and not traj.terminated and len(traj.steps) == len(replies)
    assert traj.success  # the work done before the cut is graded


@pytest.mark.slow
def test_cli_oracle_and_noop(tmp_path, env, harness_run):
    oracle, noop = (harness_run(tmp_path, "env=swe", f"agent={agent}", "limit=2") for agent in ("oracle", "noop"))
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    assert noop.returncode == 0, noop.stderr[-3000:]
    assert "success rate 100.0%" in oracle.stdout and "success rate 0.0%" in noop.stdout
