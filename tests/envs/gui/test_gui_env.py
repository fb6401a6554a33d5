"""The GUI env end to end with the real Chromium: the Gymnasium contract, scripted solvers that use
only the action language (MiniWoB tasks and every bundled app, through the oracle), wrong actions,
MiniWoB's reward semantics, screenshots, a browser killed mid-episode, and the CLI. (The suites'
completeness needs no browser: test_gui_parsing.py.)"""
from pathlib import Path

import pytest

import envs  # noqa: F401  (registers nextstate/GUI-v0)
from agents.base import NoopAgent, OracleAgent, ReplayAgent
from agents.rollout import run_episode
from envs.gui.a11y import parse_tree
from envs.gui.apps import load_app_tasks
from envs.gui.env import GUIEnv, GUIEnvConfig
from envs.gui.miniwob import load_miniwob_tasks
from envs.gui.solvers import MINIWOB_SOLVERS
from envs.limits import EpisodeLimits
from nextstate.config import REPO_ROOT
from nextstate.leaderboard import read_rows
from tests.sampling import spread

pytestmark = pytest.mark.chromium

APPS = load_app_tasks(REPO_ROOT / "envs" / "tasks" / "gui", split=None)
MINIWOB = load_miniwob_tasks("train")
NAMED = ["click-button", "click-link", "enter-text", "click-checkboxes", "focus-text", "login-user"]


@pytest.fixture(scope="module")
def gui_config(env_config) -> GUIEnvConfig:
    return env_config("gui")


@pytest.fixture(scope="module")
def env(gui_config, tmp_path_factory):
    e = GUIEnv(gui_config, tasks=APPS + MINIWOB, run_id="pytest-gui", output_dir=tmp_path_factory.mktemp("gui"))
    yield e
    e.close()


def _solve(env, task_id, seed, solver=None):
    """Run a scripted solver closed-loop: it reads the rendered tree, answers in the action language."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    assert not info.get("infra_failure"), info
    solver = solver or MINIWOB_SOLVERS[task_id]
    history, info, reward, terminated = [], {}, 0.0, False
    while not terminated and (reply := solver(env.goal, parse_tree(env.page_tree), history)) is not None:
        obs, reward, terminated, truncated, info = env.step(reply)
        assert info["next_state"].kind == "page", info["next_state"].text
        history.append(reply)
    if not terminated:
        obs, reward, terminated, truncated, info = env.step("done()")
    return reward, info, history


@pytest.mark.parametrize("task_id", NAMED + ["enter-password", "click-test"])
def test_miniwob_solvers(env, task_id):
    for seed in (0, 1):
        reward, info, history = _solve(env, task_id, seed)
        assert info["success"] and reward == 1.0 and info["raw_reward"] == 1.0, (task_id, seed, history, info)


@pytest.mark.parametrize("task", spread(APPS, lambda t: t.task_id))
def test_oracle_solves_every_app(env, gui_config, task):
    traj = run_episode(env, OracleAgent(), task, gui_config.system_prompt, seed=0)
    assert not traj.infra_failure, traj.infra_reason
    assert traj.success and traj.outcome == 1.0, [s.action_text for s in traj.steps]
    assert all(s.next_state.kind == "page" for s in traj.steps)
    shots = [s.next_state.fields.get("screenshot") for s in traj.steps[:-1]]
    assert shots and all(p and Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in shots)


@pytest.mark.parametrize("task", spread(APPS, lambda t: t.task_id))
def test_noop_fails_every_app(env, gui_config, task):
    traj = run_episode(env, NoopAgent(), task, gui_config.system_prompt, seed=0)
    assert not traj.infra_failure and not traj.success and traj.outcome == 0.0


def test_oracle_through_miniwob_reset(env, gui_config):
    """The oracle's replies are computed on a private copy of the episode, then replayed here."""
    task = next(t for t in MINIWOB if t.task_id == "click-checkboxes")
    for seed in (3, 4):
        traj = run_episode(env, OracleAgent(), task, gui_config.system_prompt, seed=seed)
        assert traj.success and traj.outcome == 1.0 and traj.terminated


def test_wrong_actions_earn_no_success(env):
    env.reset(seed=0, options={"task_id": "click-button"})
    wanted = parse_tree(env.page_tree)
    target = MINIWOB_SOLVERS["click-button"](env.goal, wanted, [])
    wrong = next(f"click({ln.ref})" for ln in wanted if ln.role == "button" and f"click({ln.ref})" != target)
    _, reward, terminated, _, info = env.step(wrong)
    assert terminated and reward == -1.0 and not info["success"] and "reward -1.00" in info["next_state"].text

    reward, info, _ = _solve(env, "enter-text", 0, solver=lambda g, lines, h: (
        None if len(h) == 2 else f'type({next(ln.ref for ln in lines if ln.role == "textbox")}, "wrong")'
        if not h else f'click({next(ln.ref for ln in lines if ln.role == "button")})'))
    assert reward == -1.0 and not info["success"]

    task = next(t for t in APPS if t.task_id == "todo/add-and-complete")  # a wrong item, then done
    reward, info, _ = _solve(env, task.task_id, 0, solver=lambda g, lines, h: None if h else
                             f'type({next(ln.ref for ln in lines if ln.role == "textbox")}, "Buy bread")')
    assert reward == 0.0 and not info["success"] and info["check_failed"]


def test_limits_truncate_and_still_grade(env, gui_config):
    task = next(t for t in APPS if t.task_id == "todo/add-and-complete")
    env.reset(seed=0, options={"task_id": task.task_id})
    replies = env.reference_actions(task)[:-1]  # the solution without its done()
    limited = EpisodeLimits(env, max_steps=len(replies))
    traj = run_episode(limited, ReplayAgent(replies), task, gui_config.system_prompt, seed=0)
    assert traj.truncated and not traj.terminated and len(traj.steps) == len(replies)
    assert traj.success and traj.outcome == 1.0  # the app is graded when the limit cuts in


def test_partial_credit_is_not_success(env):
    """click-checkboxes pays (right - wrong) / n: one box wrong out of >= 3 is partial credit."""
    for seed in range(20):
        env.reset(seed=seed, options={"task_id": "click-checkboxes"})
        if len([ln for ln in parse_tree(env.page_tree) if ln.role == "checkbox"]) >= 3:
            break
    solver = MINIWOB_SOLVERS["click-checkboxes"]

    def one_wrong(goal, lines, history):
        if not history:  # flip the first box the wrong way, then never touch it again
            return f"click({[ln for ln in lines if ln.role == 'checkbox'][0].ref})"
        boxes = [ln for ln in lines if ln.role == "checkbox"][1:]
        return solver(goal, [ln for ln in lines if ln.role != "checkbox"] + boxes, history[1:])
    reward, info, _ = _solve(env, "click-checkboxes", seed, solver=one_wrong)
    assert 0.0 < info["raw_reward"] < 1.0 and reward == info["raw_reward"] and not info["success"]


def test_bad_actions_become_error_next_states(env):
    obs, _ = env.reset(seed=0, options={"task_id": "todo/add-and-complete"})
    assert obs.startswith("Goal: Add a task") and "[ref=e" in obs
    for junk, fragment in [("", "empty"), ("hello there", "no action"), ("click(e999)", "no element e999"),
                           ('select(e1, "x")', "not a <select>"), ('press("NoSuchKey")', "unknown key"),
                           ('type(e1, "x")', "needs a text field")]:
        obs, reward, terminated, truncated, info = env.step(junk)
        assert info["next_state"].kind == "error" and fragment in info["next_state"].text, (junk, obs)
        assert obs.startswith("[error]") and reward == 0.0 and not terminated and not truncated
    textbox = next(ln.ref for ln in parse_tree(env.page_tree) if ln.role == "textbox")
    obs, *_, info = env.step(f'type({textbox}, "Tea")')
    assert "+ textbox" in info["next_state"].text and ": Tea" in obs and info["step_label"] == {"page_changed": True}


def test_every_miniwob_page_opens(env):
    """A sample in the default run; test_every_miniwob_task_opens (slow) covers all of them."""
    for task in MINIWOB[::15]:
        obs, info = env.reset(seed=0, options={"task_id": task.task_id})
        assert not info.get("infra_failure"), (task.task_id, info)
        assert env.goal and "[ref=e" in obs, task.task_id


@pytest.mark.slow
def test_every_miniwob_task_opens(env):
    for task in MINIWOB:
        obs, info = env.reset(seed=0, options={"task_id": task.task_id})
        assert not info.get("infra_failure"), (task.task_id, info)
        assert env.goal, task.task_id
        assert env.step("done()")[4]["outcome"] == 0.0  # stopped before the page ended: raw reward 0


def test_screenshot_is_the_task_area(env):
    """The PNG is MiniWoB's task area, pixel for pixel what Chromium's own clipped capture gives."""
    import base64
    import io

    from PIL import Image, ImageChops

    _, info = env.reset(seed=3, options={"task_id": "click-checkboxes"})
    session = env._session
    clipped = env._host.run(session.tab.cdp.send, "Page.captureScreenshot",
                            {"format": "png", "clip": {**session.clip, "scale": 1}})
    want = Image.open(io.BytesIO(base64.b64decode(clipped["data"]))).convert("RGB")
    got = Image.open(info["screenshot"]).convert("RGB")
    assert got.size == (160, 210) and ImageChops.difference(want, got).getbbox() is None


def test_contexts_open_no_browser_ui(env):
    """Each context's window would preload omnibox WebUIs (~1 s CPU an episode): they stay off, and
    Playwright's own disabled features stay on (one merged --disable-features)."""
    env.reset(seed=0, options={"task_id": "click-button"})
    cmdline = Path(f"/proc/{env.browser_pid}/cmdline").read_bytes().decode().split("\0")
    flags = [a for a in cmdline if a.startswith("--disable-features=")]
    assert len(flags) == 1 and {"PaintHolding", "WebUIOmniboxPopup"} <= set(flags[0].split("=", 1)[1].split(","))

    async def targets():
        cdp = await env._host._browser.new_browser_cdp_session()
        try:
            return (await cdp.send("Target.getTargets"))["targetInfos"]
        finally:
            await cdp.detach()
    kinds = {t["type"] for t in env._host.run(targets)}
    assert "page" in kinds and "browser_ui" not in kinds


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_killed_browser_is_an_infra_failure_and_recovers(gui_config):
    e = GUIEnv(gui_config, tasks=APPS[:1] + MINIWOB[:1])
    try:
        e.reset(seed=0, options={"task_id": APPS[0].task_id})
        pid = e.browser_pid
        e.kill_browser()
        obs, reward, terminated, truncated, info = e.step("click(e1)")
        assert info["infra_failure"] and terminated and reward == 0.0 and "infrastructure failure" in obs
        obs, info = e.reset(seed=0, options={"task_id": APPS[0].task_id})  # the next episode works
        assert not info.get("infra_failure") and e.browser_pid != pid and "[ref=e" in obs
        assert e.step("done()")[4]["outcome"] == 0.0
        new_pid = e.browser_pid
    finally:
        e.close()
    assert not _alive(pid) and not _alive(new_pid)  # nothing left behind


@pytest.mark.docker
@pytest.mark.slow
def test_cli_oracle_run(tmp_path, harness_run):
    p = harness_run(tmp_path, "env=gui", "env.suite=apps", "agent=oracle", "split=test", "limit=3")
    assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    assert rows[0]["env"] == "gui" and rows[0]["suite"] == "apps" and float(rows[0]["success_rate"]) == 1.0
    run_dir = Path(rows[0]["run_dir"])
    assert list((run_dir / "screenshots").rglob("*.png"))  # screenshots land in the run dir
