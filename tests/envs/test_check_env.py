"""Gymnasium's own env checker (`check_env`: spaces, reset/step signatures and types, seeding) on
every registered env kind (`envs.ENVS`), and on the tool-call env with the BFCL suite. Each env is
made with `gym.make` on a few of its tasks, after its own set-up (the terminal's shared image, the
SWE instances' images), and closed after the check."""
import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from tests.paths import ROOT


def _terminal(config, sandbox_config, request):
    from envs.task_formats import load_suite

    request.getfixturevalue("terminal_image")
    return dict(sandbox=sandbox_config, tasks=load_suite(ROOT / "envs" / "tasks" / "terminal")[:2],
                run_id="pytest-check")


def _gui(config, sandbox_config, request):
    from envs.gui.apps import load_app_tasks
    from envs.gui.miniwob import load_miniwob_tasks

    return dict(tasks=[load_app_tasks(ROOT / "envs" / "tasks" / "gui", split=None)[0],
                       load_miniwob_tasks("train")[0]])


def _toolcall(config, sandbox_config, request):
    from envs.toolcall.bundled import load_bundled

    no_docker = [t for t in load_bundled(ROOT / "envs" / "tasks" / "toolcall") if "python" not in t.data["toolsets"]]
    return dict(sandbox=sandbox_config, tasks=no_docker[:3])


def _toolcall_bfcl(config, sandbox_config, request):
    from envs.toolcall.env import ToolCallEnv

    tasks = ToolCallEnv(config, sandbox_config, split="test").tasks[::40]
    assert {t.data["kind"] for t in tasks} == {"bfcl_single", "bfcl_multi"}
    return dict(sandbox=sandbox_config, tasks=tasks)


def _swe(config, sandbox_config, request):
    from envs.swe.instances import load_swe_suite

    request.getfixturevalue("docker")
    return dict(sandbox=sandbox_config, tasks=load_swe_suite(ROOT / "envs" / "tasks" / "swe" / "instances.jsonl")[:2],
                run_id="pytest-swe-check")


def _chat(config, sandbox_config, request):
    return dict(split="test")


# (env name, config overrides) -> the gym.make keywords besides the config, after the env's set-up
SETUP = {
    ("terminal", ()): _terminal,
    ("gui", ()): _gui,
    ("toolcall", ()): _toolcall,
    ("toolcall", ("env.suite=bfcl_all",)): _toolcall_bfcl,
    ("swe", ()): _swe,
    ("chat", ()): _chat,
}
PREPARED = {"swe"}  # its instances' images are built (`prepare`) before the check, as a run builds them
MARKS = {"terminal": pytest.mark.docker, "swe": pytest.mark.docker, "gui": pytest.mark.chromium}
CASES = [pytest.param(name, (), id=name, marks=MARKS.get(name, ())) for name in envs.ENVS] + [
    pytest.param("toolcall", ("env.suite=bfcl_all",), id="toolcall-bfcl")]


@pytest.mark.parametrize(("name", "overrides"), CASES)
def test_check_env(name, overrides, env_config, sandbox_config, request):
    setup = SETUP.get((name, overrides))
    assert setup is not None, f"env {name!r} is registered but has no check_env set-up here: add one to SETUP"
    config = env_config(name, *overrides)
    e = gym.make(envs.ENVS[name].env_id, config=config, **setup(config, sandbox_config, request),
                 disable_env_checker=True)
    try:
        if name in PREPARED:
            e.unwrapped.prepare()
        check_env(e.unwrapped, skip_render_check=True)
    finally:
        e.close()
