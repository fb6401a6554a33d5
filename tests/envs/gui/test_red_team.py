"""Attacks on the GUI env's line between the agent's faults and the browser's.

The attacks: a browser call slower than `call_timeout_s` counted as an infra failure (unscored), or an
action that asks the browser for too much, would let an agent turn its own failing episode into an
unscored one by typing 20,000 characters or pressing a 2,000-key combination; `scroll(0, 1e999)` would
raise OverflowError out of `step`. Such actions are refused before they reach the browser with an error
next state (caps in conf/env/gui.yaml), the episode goes on, and only a browser that dies on its own
is an infra failure."""
import time

import pytest

import envs  # noqa: F401  (registers nextstate/GUI-v0)
from envs.gui.a11y import parse_tree
from envs.gui.actions import parse_reply
from envs.gui.apps import load_app_tasks
from envs.gui.env import GUIEnv, GUIEnvConfig
from nextstate.config import REPO_ROOT

pytestmark = pytest.mark.red_team

APPS = load_app_tasks(REPO_ROOT / "envs" / "tasks" / "gui", split=None)
TASK = "todo/add-and-complete"


@pytest.mark.parametrize("reply", ["scroll(0, 1e999)", "scroll(-1e999, 0)", "scroll(0, 1e400)",
                                   "scroll(0, " + "9" * 5000 + ")", "scroll(0, 0x" + "f" * 5000 + ")",
                                   "scroll(0, -0x" + "f" * 5000 + ") scroll(0, 1)"])
def test_absurd_numbers_are_reasons_never_exceptions(reply):
    parsed = parse_reply(reply)  # raised OverflowError / ValueError before
    assert parsed.error or parsed.action.name == "scroll"
    if parsed.error:
        assert len(parsed.error) < 600  # the reason quotes the reply, cut short
    else:
        assert len(parsed.action.render()) < 60  # an int of 6,000 digits cannot even be printed


@pytest.fixture(scope="module")
def gui_config(env_config) -> GUIEnvConfig:
    return env_config("gui")


@pytest.fixture(scope="module")
def env(gui_config):
    e = GUIEnv(gui_config, tasks=APPS, run_id="pytest-red-team-gui")
    yield e
    e.close()


def _textbox(env) -> str:
    return next(ln.ref for ln in parse_tree(env.page_tree) if ln.role == "textbox")


def _refused(env, reply: str, fragment: str) -> None:
    pid = env.browser_pid
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(reply)
    assert time.monotonic() - t0 < 5, "refused before it reached the browser"
    ns = info["next_state"]
    assert ns.kind == "error" and fragment in ns.text and obs.startswith("[error]"), ns.text
    assert len(obs) < 1_000 and not terminated and not truncated and reward == 0.0
    assert not info.get("infra_failure") and env.browser_pid == pid


@pytest.mark.chromium
def test_caps_refuse_what_would_hang_the_browser(env, gui_config):
    env.reset(seed=0, options={"task_id": TASK})
    box = _textbox(env)
    _refused(env, f'type({box}, "{"x" * 20_000}")', f"at most {gui_config.type_max_chars} per action")
    _refused(env, 'press("' + "+".join(["a"] * 2_000) + '")', "nothing was pressed")
    _refused(env, "scroll(0, 1e308)", f"at most {gui_config.scroll_max_px} pixels")
    _refused(env, f"scroll({-gui_config.scroll_max_px - 1}, 0)", "nothing was scrolled")
    _refused(env, "scroll(0, 1e999)", "finite numbers")
    # the episode goes on, in the same browser, and is graded as the agent's
    obs, *_, info = env.step(f"scroll(0, {gui_config.scroll_max_px})")
    assert info["next_state"].kind == "page"
    obs, *_, info = env.step(f'type({box}, "Tea")')
    assert info["next_state"].kind == "page" and ": Tea" in obs
    obs, reward, terminated, truncated, info = env.step("done()")
    assert terminated and not info.get("infra_failure") and reward == 0.0 and info["check_failed"]


@pytest.mark.chromium
def test_typing_up_to_the_cap_is_well_inside_the_call_timeout(env, gui_config):
    """The cap is only right if the browser can always do what it allows: the longest text allowed
    is typed in a fraction of `call_timeout_s` (so a timeout is the browser's fault)."""
    env.reset(seed=0, options={"task_id": TASK})
    n = gui_config.type_max_chars
    t0 = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(f'type({_textbox(env)}, "{"y" * n}")')
    elapsed = time.monotonic() - t0
    assert info["next_state"].kind == "page" and not info.get("infra_failure") and "y" * 100 in obs
    assert elapsed < gui_config.call_timeout_s / 2, elapsed


@pytest.mark.chromium
def test_a_browser_that_dies_on_its_own_is_still_infra(gui_config):
    e = GUIEnv(gui_config, tasks=APPS, run_id="pytest-red-team-gui-kill")
    try:
        e.reset(seed=0, options={"task_id": TASK})
        box = _textbox(e)
        e.kill_browser()
        obs, reward, terminated, truncated, info = e.step(f'type({box}, "Tea")')  # an innocent action
        assert info["infra_failure"] and terminated and reward == 0.0 and "infrastructure failure" in obs
    finally:
        e.close()


@pytest.mark.chromium
def test_typed_markup_stays_text_and_cannot_rewrite_the_apps_state(env):
    """The success check reads `window.__app.state()` from the page; an agent has no action that runs
    script, so its only way in would be markup an app renders as HTML (the bundled apps render text
    with textContent). Typed as a new task, an `onerror` that would replace state() with one meeting
    the expectation stays a literal title, and the episode fails its check (with the todo app changed
    to render titles as HTML, this attack scored 1.0)."""
    env.reset(seed=0, options={"task_id": TASK})
    forged = ("window.__app.state=function(){return{titles:['Pay\\\\x20rent','Call\\\\x20mom',"
              "'Water\\\\x20plants','Buy\\\\x20milk'],done_titles:['Pay\\\\x20rent','Call\\\\x20mom']}}")
    # no space and no '>' (the attribute is unquoted); the reply's quotes turn \\x20 into \x20 for JS
    payload = f"<img src=x onerror={forged}><script>{forged}</script>"
    env.step(f'type({_textbox(env)}, "{payload}")')
    obs, *_ = env.step('press("Enter")')
    assert "<img src=x" in obs  # the page shows the markup as text
    obs, reward, terminated, truncated, info = env.step("done()")
    assert terminated and reward == 0.0 and info["check_failed"] and not info.get("infra_failure")
