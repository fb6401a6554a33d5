"""`nextstate/GUI-v0`: web tasks in Debian's Chromium, driven by Playwright, read through the
browser's accessibility tree.

Tasks: every MiniWoB++ page of the `miniwob` wheel (gui_miniwob) and the bundled multi-step apps
(gui_apps), served from a loopback server (gui_server). `suite` picks miniwob | apps | all.

Observation: the goal, then the page's accessibility tree with element refs (gui_a11y). Action:
one of click(ref), type(ref, "text"), select(ref, "option"), press("Key"), scroll(dx, dy), done()
(gui_actions). The next state says what the action changed: a compact diff of the tree (what the
judge reads); the agent's observation is that diff followed by the whole current tree (with
`after_action: diff`, the diff alone, a change of focus not counted as one: short prompts). A PNG
screenshot of every state is written under `<output_dir>/screenshots/` for visual policies; the
output dir is the `output_dir` config value, the constructor's `output_dir`, a reset option
`output_dir` (under `harness.run`, the run dir: envs/make.py); with none of them no screenshot is taken.

Episodes: one fresh browser context each (gui_browser); the browser process is shared and
relaunched when it dies. A MiniWoB page ends its episode itself (raw reward, success = full
success); an app is graded when the agent says done() (or a limit cuts it) by reading the app's
state. Browser trouble is an infra failure (`info["infra_failure"]`), never a reward; an action
that would take the browser longer than it may answer (typing a book, pressing a thousand keys at
once, scrolling by 1e308 pixels) is refused with an error next state before it is sent
(`type_max_chars`, `press_max_chars`, `scroll_max_px`), so a browser that stops answering is the
browser's fault, not the agent's.
"""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from pathlib import Path

from envs.base import TextEnv, given_or_default, pick_task, set_tasks
from envs.gui.a11y import parse_tree
from envs.gui.actions import GUIAction, parse_reply
from envs.gui.apps import STATE_JS, check, load_app_tasks
from envs.gui.browser import BrowserDied, BrowserHost, BrowserOptions
from envs.gui.miniwob import (
    HIDE_CHROME_CSS,
    METADATA_JS,
    START_JS,
    html_dir,
    load_miniwob_tasks,
    window_and_clip,
)
from envs.gui.oracle import GUIOracle
from envs.gui.page import ActionError, PageSession
from envs.gui.server import StaticServer
from envs.gui.solvers import SolverError
from envs.gui.templated import load_templated
from envs.gui.transitions import first_line, miniwob_verdict, over_cap, page_next_state, render_obs
from nextstate.config import REPO_ROOT, EnvConfig
from nextstate.types import NextState, Task


@dataclass
class GUIEnvConfig(EnvConfig):
    suite: str  # miniwob | apps | all | templated
    templated_train: int  # suite: templated: how many of the listed train and test instances
    templated_test: int
    apps_dir: str
    chromium: str
    chromium_args: list[str]
    viewport_width: int  # apps; MiniWoB pages use MiniWoB's own window size
    viewport_height: int
    miniwob_episode_ms: int | None
    launch_timeout_s: float
    call_timeout_s: float
    nav_timeout_s: float
    screenshots: bool
    output_dir: str | None
    obs_max_chars: int
    diff_max_lines: int
    after_action: str  # what the agent reads after an action: diff_and_page | diff (its prompt stays short)
    prewarm: bool
    prewarm_idle_s: float
    oracle_max_steps: int
    type_max_chars: int  # what one action may do (see `_over_cap`)
    press_max_chars: int
    scroll_max_px: int


def load_gui_tasks(config: GUIEnvConfig, split: str | None) -> list[Task]:
    """The tasks of `config.suite`: MiniWoB's pages, the bundled apps, both, or the templated
    MiniWoB instances (a page at a fixed seed; envs/gui/templated.py)."""
    suite = config.suite
    if suite == "templated":
        return load_templated(split, config.templated_train, config.templated_test)
    if suite not in ("miniwob", "apps", "all"):
        raise ValueError(f"unknown GUI suite {suite!r}; choose miniwob, apps, all or templated")
    apps_dir = Path(config.apps_dir)
    apps_dir = apps_dir if apps_dir.is_absolute() else REPO_ROOT / apps_dir
    tasks = []
    if suite in ("apps", "all"):
        tasks += load_app_tasks(apps_dir, split)
    if suite in ("miniwob", "all"):
        tasks += load_miniwob_tasks(split)
    return tasks


class _StartError(RuntimeError):
    pass


class GUIEnv(GUIOracle, TextEnv):
    seed_shapes_episodes = True  # MiniWoB seeds each page's random content

    def __init__(self, config: GUIEnvConfig | None = None, sandbox=None, *, tasks: list[Task] | None = None,
                 split: str | None = None, run_id: str = "adhoc", output_dir: str | Path | None = None):
        config, _ = given_or_default("gui", GUIEnvConfig, config, sandbox)
        if config.after_action not in ("diff_and_page", "diff"):
            raise ValueError(f"env.after_action={config.after_action!r}: choose diff_and_page or diff")
        self.config, self.run_id = config, run_id
        set_tasks(self, tasks if tasks is not None else load_gui_tasks(config, split),
                  f"no GUI tasks for suite={config.suite!r} split={split}")
        # A templated instance is a page at its own seed: the reset seed does not change it.
        self.seed_shapes_episodes = not all(t.data.get("templated") for t in self.tasks)
        out = output_dir or config.output_dir
        self.output_dir = Path(out) if out else None
        self._host = BrowserHost(BrowserOptions(
            executable=config.chromium, args=tuple(config.chromium_args),
            launch_timeout_s=config.launch_timeout_s, call_timeout_s=config.call_timeout_s,
            nav_timeout_s=config.nav_timeout_s, prewarm_idle_s=config.prewarm_idle_s))
        self._server: StaticServer | None = None
        self._session: PageSession | None = None
        self.task: Task | None = None
        self.goal = ""
        self.seed_used = 0
        self._episode = 0
        self._step = 0
        self._shots: Path | None = None
        self._final: tuple[float, dict] | None = None

    # -- plumbing -------------------------------------------------------------------------------
    def _url(self, task: Task) -> str:
        if self._server is None:
            apps_dir = Path(self.config.apps_dir)
            self._server = StaticServer({"miniwob": html_dir(),
                                         "apps": apps_dir if apps_dir.is_absolute() else REPO_ROOT / apps_dir})
        mount = "miniwob" if task.data["suite"] == "miniwob" else "apps"
        return self._server.url(mount, task.data["path"])

    def _geometry(self, task: Task) -> tuple[tuple[int, int], dict | None]:
        if task.data["suite"] == "miniwob":
            return window_and_clip(task)
        return (self.config.viewport_width, self.config.viewport_height), None

    def _shot_path(self) -> Path | None:
        if self._shots is None:
            return None
        return self._shots / f"step{self._step:02d}.png"

    async def _open(self, task: Task, seed: int, url: str, screenshot: Path | None):
        (w, h), clip = self._geometry(task)
        tab = await self._host.open_tab(url, w, h)
        session = PageSession(tab, clip)
        try:
            if task.data["suite"] == "miniwob":
                res = await tab.page.evaluate(START_JS, [str(seed), self.config.miniwob_episode_ms,
                                                         task.split, HIDE_CHROME_CSS])
                if not res.get("ready"):
                    raise _StartError(f"MiniWoB task {task.task_id} did not become ready")
                goal = str(res.get("utterance") or "")
            else:
                goal = task.instruction
            tree, shot = await session.observe(screenshot)
        except BaseException:
            await tab.close()
            raise
        return session, goal, tree, shot

    async def _act(self, action: GUIAction, screenshot: Path | None):
        """Act, then read the page; a MiniWoB page's reward is read alongside (one round trip, not
        two in a row), and when it says the episode ended the read is dropped unawaited: the page
        shows its START cover then, nothing to observe."""
        session = self._session
        old = session.tree
        await session.act(action)
        read = asyncio.ensure_future(session.read(screenshot is not None))
        meta = None
        if self.task.data["suite"] == "miniwob":
            try:
                meta = await session.page.evaluate(METADATA_JS)
            finally:
                if meta is None or meta["done"]:
                    read.add_done_callback(lambda f: f.cancelled() or f.exception())  # dropped: no warning
            if meta["done"]:
                return old, old, None, meta, session.take_dialogs()
        tree, png = await read
        tree, shot = session.keep(tree, png, screenshot)
        return old, tree, shot, meta, session.take_dialogs()

    async def _read(self, js: str):
        return await self._session.page.evaluate(js)

    def _close_session(self) -> None:
        """Close the episode's context off the critical path (a dying browser takes it along)."""
        session, self._session = self._session, None
        if session is not None and self._host.connected:
            self._host.close_tab(session.tab)

    # -- gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._close_session()
        options = options or {}
        self.task = pick_task(self, options, "GUI task")
        # drawn for every task, also a templated one (whose page seed is fixed): the env's seed stream
        # is then the same whatever the suite, and so is every later draw of an episode
        drawn = int(self.np_random.integers(2**31 - 1))
        self.seed_used = self.task.data["seed"] if self.task.data.get("templated") else drawn
        self._matched: list[str] = []  # a templated episode's actions that matched the solver, in order
        self._episode += 1
        self._step = 0
        self._final = None
        out = options.get("output_dir") or self.output_dir
        self._shots = None
        if out is not None and self.config.screenshots:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", self.task.task_id)
            self._shots = Path(out) / "screenshots" / safe / f"ep{self._episode:03d}-s{self.seed_used}"
        t0 = time.monotonic()
        info: dict = {"task_id": self.task.task_id, "seed": self.seed_used}
        url = self._url(self.task)
        try:
            self._session, self.goal, tree, shot = self._host.run(
                self._open, self.task, self.seed_used, url, self._shot_path())
        except Exception as e:  # noqa: BLE001  (the browser or the page failed us, not the agent)
            self._session, self.goal, tree, shot = None, "", "", None
            info.update(infra_failure=True, infra_reason=f"{type(e).__name__}: {first_line(e)}")
        else:
            if self.config.prewarm:
                (w, h), _ = self._geometry(self.task)
                self._host.prewarm(url, w, h)
        info.update(setup_s=time.monotonic() - t0, screenshot=shot)
        return render_obs(f"Goal: {self.goal}", tree, self.config.obs_max_chars), info

    def step(self, action: str):
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self._session is None:
            return self._infra_failure("the browser page is not open (it failed at reset or died)")
        if self._final is not None:
            ns = NextState(kind="error", text="the episode has ended; call reset()")
            return f"[error] {ns.text}", 0.0, True, False, {"next_state": ns}
        parsed = parse_reply(action)
        if parsed.error:
            return self._error(parsed.error)
        info: dict = {}
        if parsed.action is not None:
            act = parsed.action
            over = over_cap(act, self.config)
            if over:
                return self._error(over)
            if act.ref is not None and act.ref not in self._session.tree_refs:
                return self._error(f"there is no element {act.ref} on the page; use a [ref=...] from the latest page")
            self._step += 1
            label = self._solver_label(act)
            try:
                old, tree, shot, meta, dialogs = self._host.run(self._act, act, self._shot_path())
            except BrowserDied as e:
                return self._infra_failure(str(e))
            except ActionError as e:
                if not self._host.connected:
                    return self._infra_failure(f"the browser died: {e}")
                return self._error(str(e))
            except Exception as e:  # noqa: BLE001  (a Playwright error from the action: timeout, detached ...)
                if not self._host.connected:
                    return self._infra_failure(first_line(e))
                return self._error(f"{act.render()} failed: {first_line(e)}")
            ns, text = page_next_state(act, old, tree, shot, meta, dialogs, self.config.diff_max_lines,
                                       ignore_focus=self.config.after_action == "diff")
            info["next_state"] = ns
            if label is not None:
                info["step_label"] = label
            if ns.fields["task_ended"]:  # the page ended the episode: its reward is the verdict
                obs = text
                parsed = type(parsed)(action=act, done=True)
                raw, final = miniwob_verdict(meta)  # already read with the action: no second read
                self._final = (raw, {**final, "verify_s": 0.0})
            else:
                if label is None:
                    info["step_label"] = {"page_changed": bool(ns.fields["added"] or ns.fields["removed"])}
                obs = text if self.config.after_action == "diff" else render_obs(text, tree, self.config.obs_max_chars)
        else:
            ns = NextState(kind="page", text="done()", fields={"action": "done()"})
            info["next_state"] = ns
            obs = "done()"
        if not parsed.done:
            return obs, 0.0, False, False, info
        outcome, final = self.finalize()
        info.update(final)
        if final.get("infra_failure"):
            return obs, 0.0, True, False, info
        if parsed.action is None and self.task.data.get("templated"):
            info["step_label"] = {"solved": bool(final.get("success"))}
        return obs, outcome, True, False, info

    def _solver_label(self, act: GUIAction) -> dict | None:
        """A templated step's verifiable label: would the page's solver, on the page the agent sees
        and the steps that matched it so far, have done this? None off the templated suite, or where
        the solver cannot read the page (it was led somewhere its script does not know)."""
        if not self.task.data.get("templated"):
            return None
        solver = self._solver(self.task)
        try:
            expected = solver(self.goal, parse_tree(self._session.tree), self._matched)
        except (SolverError, LookupError, ValueError):
            return None
        ref = parse_reply(expected).action if expected else None
        matches = ref is not None and ref.render() == act.render()
        if matches:
            self._matched.append(expected)
        return {"matches_solver": matches}

    def finalize(self) -> tuple[float, dict]:
        """Grade the episode once: MiniWoB's raw reward, or the app's state against the task's
        expectations. Idempotent."""
        if self._final is not None:
            return self._final
        if self._session is None or self.task is None:
            return 0.0, {}
        t0 = time.monotonic()
        try:
            if self.task.data["suite"] == "miniwob":
                raw, info = miniwob_verdict(self._host.run(self._read, METADATA_JS))
            else:
                state = self._host.run(self._read, STATE_JS)
                failed = ["the app exposes no state"] if state is None else check(state, self.task.data["expect"])
                raw = 0.0 if failed else 1.0
                info = {"outcome": raw, "success": not failed, "check_failed": failed[:10]}
        except Exception as e:  # noqa: BLE001
            reason = str(e) if isinstance(e, BrowserDied) else f"grading failed: {first_line(e)}"
            self._final = (0.0, {"infra_failure": True, "infra_reason": reason})
            self._close_session()
            return self._final
        info["verify_s"] = time.monotonic() - t0
        self._final = (raw, info)
        return self._final

    def tools_for(self, task: Task) -> None:
        return None  # GUI agents answer in the action language, not with tool calls

    def close(self):
        self._close_session()
        self._host.close()
        if self._server is not None:
            self._server.close()
            self._server = None
        super().close()

    # -- helpers ----------------------------------------------------------------------------------
    @property
    def page_tree(self) -> str:
        """The current page's rendered tree (what the last observation showed)."""
        return self._session.tree if self._session is not None else ""

    @property
    def browser_pid(self) -> int | None:
        return self._host.pid

    def kill_browser(self) -> None:
        """SIGKILL the browser (tests: what a crash looks like)."""
        self._host.kill()

    def _error(self, message: str):
        """The reply could not act (unparsed, no such ref, too much at once): an observation, and on a
        templated page a wrong step (the solver always acts)."""
        info: dict = {"next_state": NextState(kind="error", text=message)}
        if self.task is not None and self.task.data.get("templated"):
            info["step_label"] = {"matches_solver": False}
        return f"[error] {message}", 0.0, False, False, info

    def _infra_failure(self, reason: str):
        self._session = None
        self._final = (0.0, {"infra_failure": True, "infra_reason": reason})
        ns = NextState(kind="error", text=f"infrastructure failure: {reason}")
        return f"[error] {ns.text}", 0.0, True, False, {"next_state": ns, "infra_failure": True,
                                                          "infra_reason": reason}
