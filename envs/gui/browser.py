"""The browser process: one Chromium (Debian's, launched by Playwright) reused across episodes,
one isolated browser context per episode, relaunched when it dies.

Playwright's async API runs on a private thread with its own event loop; the env calls
`BrowserHost.run(coroutine_fn, ...)` and blocks on the result. Why not the sync API: the sync
API cannot do anything between calls, and a fresh context + page + page load costs ~3x a whole
MiniWoB reset on this machine (measured: ~200 ms + ~110 ms vs ~70-90 ms). With a loop of its own
the host opens the *next* episode's context in the background (`prewarm`) while the agent thinks,
so a reset of the same task (the n rollouts of a GRPO group, a benchmark) finds its page loaded.
It also keeps the env's methods plain blocking calls that are safe to make from inside someone
else's running asyncio loop, which the sync API forbids.

A dead browser (killed, crashed) or a call that hangs past `call_timeout_s` raises `BrowserDied`;
the env reports that episode as an infra failure and the next `open_tab` launches a new browser.
The launch flags (and why) are in envs/gui/launch_flags.py.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from playwright.async_api import Browser, BrowserContext, CDPSession, Page, async_playwright
from playwright.async_api import Error as PlaywrightError

from envs.gui.launch_flags import launch_args

T = TypeVar("T")


class BrowserDied(RuntimeError):
    """The browser is gone or stopped answering: an infra failure, never the agent's fault."""


@dataclass(frozen=True)
class BrowserOptions:
    executable: str
    args: tuple[str, ...]
    launch_timeout_s: float
    call_timeout_s: float
    nav_timeout_s: float
    prewarm_idle_s: float  # a prewarm step starts only after the env has been idle this long


@dataclass
class _Spare:
    """The next episode's tab, being opened in the background."""

    key: tuple
    fut: asyncio.Future | None = None
    urgent: asyncio.Event = field(default_factory=asyncio.Event)  # a reset is waiting for it


@dataclass
class Tab:
    """One episode's browser context, its page and a CDP session on that page."""

    context: BrowserContext
    page: Page
    cdp: CDPSession
    key: tuple

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.context.close()


class BrowserHost:
    def __init__(self, options: BrowserOptions):
        self.options = options
        self.pid: int | None = None  # the browser process, for tests and for killing a hung one
        self.launches = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pw = None
        self._browser: Browser | None = None
        self._spare: _Spare | None = None
        self._active = 0  # env calls running on the loop (prewarm yields to them)
        self._idle_since = time.monotonic()
        self._closing = 0  # tabs waiting to be closed in the background

    # -- the loop thread ---------------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nextstate-browser", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, timeout: float | None = None) -> T:
        """Run `await fn(*args)` on the browser thread and return its result. Playwright errors
        pass through (the action's fault) unless the browser is gone, which raises BrowserDied."""
        loop = self._ensure_loop()
        fut = asyncio.run_coroutine_threadsafe(self._tracked(fn, *args), loop)
        try:
            return fut.result(timeout or self.options.call_timeout_s)
        except concurrent.futures.TimeoutError as e:
            fut.cancel()
            self.kill()  # a hung browser is replaced at the next open_tab
            waited = timeout or self.options.call_timeout_s
            raise BrowserDied(f"the browser did not answer within {waited:.0f} s") from e
        except PlaywrightError as e:
            if not self.connected or "has been closed" in str(e) or "Target closed" in str(e):
                raise BrowserDied(f"the browser died: {str(e).splitlines()[0]}") from e
            raise

    async def _tracked(self, fn, *args):
        self._active += 1
        try:
            return await fn(*args)
        finally:
            self._active -= 1
            self._idle_since = time.monotonic()

    async def _yield_to_env(self, spare: _Spare | None) -> None:
        """Background work waits here until no env call is running (and none ran for
        `prewarm_idle_s`), so it fills the agent's thinking time instead of slowing a step."""
        while spare is not None and not spare.urgent.is_set():
            if self._active == 0 and time.monotonic() - self._idle_since >= self.options.prewarm_idle_s:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(spare.urgent.wait(), 0.01)

    @property
    def connected(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    # -- browser process -------------------------------------------------------------------------
    async def _browser_ready(self) -> Browser:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
            self._browser = None
        if self._pw is None:
            self._pw = await async_playwright().start()
        args, ignore = launch_args(self.options.args)
        try:
            browser = await self._pw.chromium.launch(
                executable_path=self.options.executable, args=args, ignore_default_args=ignore, headless=True,
                timeout=self.options.launch_timeout_s * 1000)
        except PlaywrightError as e:
            raise BrowserDied(f"cannot launch {self.options.executable}: {str(e).splitlines()[0]}") from e
        cdp = await browser.new_browser_cdp_session()
        info = await cdp.send("SystemInfo.getProcessInfo")
        await cdp.detach()
        self.pid = next((p["id"] for p in info["processInfo"] if p["type"] == "browser"), None)
        self._browser = browser
        self.launches += 1
        return browser

    def kill(self) -> None:
        """SIGKILL the browser process (what a crash looks like)."""
        if self.pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    # -- tabs ----------------------------------------------------------------------------------
    async def _new_tab(self, key: tuple, spare: _Spare | None = None) -> Tab:
        url, width, height = key
        await self._yield_to_env(spare)
        browser = await self._browser_ready()
        context = await browser.new_context(viewport={"width": width, "height": height})
        try:
            await self._yield_to_env(spare)
            page = await context.new_page()
            await self._yield_to_env(spare)
            _, cdp = await asyncio.gather(page.goto(url, wait_until="load", timeout=self.options.nav_timeout_s * 1000),
                                          context.new_cdp_session(page))
        except BaseException:
            with contextlib.suppress(Exception):
                await context.close()
            raise
        return Tab(context, page, cdp, key)

    async def open_tab(self, url: str, width: int, height: int) -> Tab:
        """A fresh context with `url` loaded: the prewarmed one if it matches, else a new one."""
        key = (url, width, height)
        spare, self._spare = self._spare, None
        if spare is not None:
            if spare.key == key and self.connected:
                spare.urgent.set()
                try:
                    return await spare.fut
                except Exception:  # noqa: BLE001  (a failed prewarm is retried cold below)
                    pass
            else:
                _abandon(spare)
        return await self._new_tab(key)

    def close_tab(self, tab: Tab) -> None:
        """Close an episode's context in the background, once the env is idle (returns at once)."""
        async def close_when_idle():
            self._closing += 1
            try:
                if self._closing <= 2:  # more waiting than that: close now, keep memory bounded
                    await self._yield_to_env(_Spare(key=()))
                await tab.close()
            finally:
                self._closing -= 1

        self._ensure_loop().call_soon_threadsafe(lambda: asyncio.ensure_future(close_when_idle()))

    def prewarm(self, url: str, width: int, height: int) -> None:
        """Start opening the next episode's tab in the background (returns at once)."""
        key = (url, width, height)

        def schedule():
            if self._spare is not None:
                if self._spare.key == key:
                    return
                _abandon(self._spare)
            spare = _Spare(key)
            spare.fut = asyncio.ensure_future(self._new_tab(key, spare))
            spare.fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved"
            self._spare = spare

        self._ensure_loop().call_soon_threadsafe(schedule)

    # -- shutdown ----------------------------------------------------------------------------------
    async def _shutdown(self) -> None:
        if self._spare is not None:
            fut = self._spare.fut
            self._spare = None
            fut.cancel()
            with contextlib.suppress(BaseException):
                tab = await fut
                await tab.close()
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
            self._browser = None
        if self._pw is not None:
            with contextlib.suppress(Exception):
                await self._pw.stop()
            self._pw = None

    def close(self) -> None:
        """Close the browser and stop the thread. Idempotent."""
        if self._loop is None:
            return
        loop, thread = self._loop, self._thread
        if thread is not None and thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(30)
            except Exception:  # noqa: BLE001  (a dead browser still has to let the thread go)
                self.kill()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        if not loop.is_running():
            loop.close()
        self._loop = self._thread = None


def _abandon(spare: _Spare) -> None:
    spare.fut.add_done_callback(_close_quietly)
    spare.fut.cancel()


def _close_quietly(fut: asyncio.Future) -> None:
    """Done-callback for an abandoned prewarm: close its context if it opened one."""
    if fut.cancelled() or fut.exception() is not None:
        return
    asyncio.ensure_future(fut.result().close())
