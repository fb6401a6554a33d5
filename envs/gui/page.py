"""One episode's page: observe it (accessibility tree + screenshot) and act on it by ref.

Everything here is a coroutine run on the browser thread (see gui_browser). Actions go through
Chromium as a user's would: a click is a real mouse press/release at the element's centre (so an
element covered by another is not clicked through), typing is real key events into the focused
field, a key press is a real key event; only `select` sets a <select>'s value from script (a native
drop-down list cannot be driven by mouse in headless Chromium), firing input/change as the browser
does. Elements are found by the backend node id behind their ref, never by CSS selectors.
"""
from __future__ import annotations

import asyncio
import base64
import io
from dataclasses import dataclass, field
from pathlib import Path

from envs.gui.a11y import RefTable, refs_in, render_tree
from envs.gui.actions import GUIAction
from envs.gui.browser import Tab


class ActionError(Exception):
    """The action could not be carried out (the agent's problem, told to it as an error)."""


_PREPARE_TYPING = """function() {
  const el = this, nonText = ['checkbox','radio','button','submit','reset','file','image','range','color','hidden'];
  const editable = el.isContentEditable || el instanceof HTMLTextAreaElement ||
      (el instanceof HTMLInputElement && !nonText.includes(el.type));
  if (!editable) return 'not-editable';
  if (el.disabled || el.readOnly) return 'read-only';
  el.focus();
  if (typeof el.select === 'function') el.select();
  else { const r = document.createRange(); r.selectNodeContents(el);
         const s = getSelection(); s.removeAllRanges(); s.addRange(r); }
  return 'ok';
}"""

_SELECT = """function(wanted) {
  if (!(this instanceof HTMLSelectElement)) return {error: 'not-select'};
  if (this.disabled) return {error: 'disabled'};
  const opts = Array.from(this.options), w = wanted.trim();
  const o = opts.find(o => o.label.trim() === w || o.text.trim() === w) || opts.find(o => o.value === wanted)
         || opts.find(o => o.label.trim().toLowerCase() === w.toLowerCase());
  if (!o) return {error: 'no-option', options: opts.map(o => o.label.trim())};
  if (o.disabled) return {error: 'option-disabled'};
  this.focus();
  this.value = o.value;
  this.dispatchEvent(new Event('input', {bubbles: true}));
  this.dispatchEvent(new Event('change', {bubbles: true}));
  return {ok: o.label.trim()};
}"""

_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


@dataclass
class PageSession:
    tab: Tab
    clip: dict | None = None  # screenshot region (MiniWoB's task area), None = the viewport
    refs: RefTable = field(default_factory=RefTable)
    tree: str = ""
    tree_refs: set[str] = field(default_factory=set)
    dialogs: list[str] = field(default_factory=list)
    pointer: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        self.tab.page.on("dialog", self._on_dialog)

    async def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        try:
            await dialog.accept()
        except Exception:  # noqa: BLE001  (the page may be gone already)
            pass

    @property
    def page(self):
        return self.tab.page

    # -- observing -----------------------------------------------------------------------------
    async def _frames(self, nodes: list[dict]) -> dict[int, list[dict]]:
        """Documents of iframes (their AX trees are separate), keyed by the iframe's backend id."""
        if not any((n.get("role") or {}).get("value") == "Iframe" for n in nodes):
            return {}
        cdp, out = self.tab.cdp, {}
        tree = (await cdp.send("Page.getFrameTree"))["frameTree"]
        stack = list(tree.get("childFrames", []))
        while stack:
            f = stack.pop()
            stack.extend(f.get("childFrames", []))
            fid = f["frame"]["id"]
            try:
                owner = await cdp.send("DOM.getFrameOwner", {"frameId": fid})
                sub = await cdp.send("Accessibility.getFullAXTree", {"frameId": fid})
            except Exception:  # noqa: BLE001  (a frame that went away while we looked)
                continue
            out[owner["backendNodeId"]] = sub["nodes"]
        return out

    async def _tree(self) -> str:
        nodes = (await self.tab.cdp.send("Accessibility.getFullAXTree"))["nodes"]
        return render_tree(nodes, self.refs, await self._frames(nodes))

    async def _png(self) -> bytes:
        """The viewport as a PNG, cut to `clip` here rather than by Chromium: a clipped capture makes
        Chromium emulate a viewport for an extra frame (~10 ms a step). MiniWoB's own env crops a
        full capture the same way, so the pixels are the same."""
        data = base64.b64decode((await self.tab.cdp.send("Page.captureScreenshot", {"format": "png"}))["data"])
        return crop_png(data, self.clip) if self.clip else data

    async def read(self, screenshot: bool) -> tuple[str, bytes | None]:
        """The page's rendered tree and (when asked) its PNG, fetched together; nothing is kept
        until `keep`, so a read that turns out to be moot can be dropped."""
        if not screenshot:
            return await self._tree(), None
        tree, png = await asyncio.gather(self._tree(), self._png())
        return tree, png

    def keep(self, tree: str, png: bytes | None, screenshot: Path | None) -> tuple[str, str | None]:
        """Make a read the current state: its tree (and refs) for the next action, its PNG on disk."""
        self.tree, self.tree_refs = tree, refs_in(tree)
        if png is None or screenshot is None:
            return tree, None
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(png)
        return tree, str(screenshot)

    async def observe(self, screenshot: Path | None) -> tuple[str, str | None]:
        """The page's tree now (also kept as `self.tree`) and the screenshot's path, taken together."""
        tree, png = await self.read(screenshot is not None)
        return self.keep(tree, png, screenshot)

    # -- acting ----------------------------------------------------------------------------------
    def _backend(self, ref: str) -> int:
        if ref not in self.tree_refs or ref not in self.refs.by_ref:
            raise ActionError(f"there is no element {ref} on the page now; use a ref from the latest page")
        return self.refs.by_ref[ref]

    async def _object(self, ref: str) -> str:
        try:
            res = await self.tab.cdp.send("DOM.resolveNode", {"backendNodeId": self._backend(ref)})
        except ActionError:
            raise
        except Exception as e:  # noqa: BLE001
            _reraise_if_gone(e)
            raise ActionError(f"element {ref} is gone from the page ({_first_line(e)})") from None
        return res["object"]["objectId"]

    async def _call(self, ref: str, fn: str, *args) -> object:
        oid = await self._object(ref)
        res = await self.tab.cdp.send("Runtime.callFunctionOn", {
            "objectId": oid, "functionDeclaration": fn, "returnByValue": True,
            "arguments": [{"value": a} for a in args]})
        return (res.get("result") or {}).get("value")

    async def _quad_centre(self, backend: int) -> tuple[float, float] | None:
        quads = (await self.tab.cdp.send("DOM.getContentQuads", {"backendNodeId": backend}))["quads"]
        for q in quads:
            xs, ys = q[0::2], q[1::2]
            if max(xs) - min(xs) >= 1 and max(ys) - min(ys) >= 1:
                return sum(xs) / 4, sum(ys) / 4
        return None

    async def _centre(self, ref: str) -> tuple[float, float]:
        """Where to click: the element's centre, scrolled into view first when it is outside."""
        backend = self._backend(ref)
        vp = self.page.viewport_size or {"width": 0, "height": 0}
        try:
            c = await self._quad_centre(backend)
            if c is None or not (0 <= c[0] < vp["width"] and 0 <= c[1] < vp["height"]):
                await self.tab.cdp.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend})
                c = await self._quad_centre(backend)
        except Exception as e:  # noqa: BLE001
            _reraise_if_gone(e)
            raise ActionError(f"element {ref} cannot be clicked: {_first_line(e)}") from None
        if c is None:
            raise ActionError(f"element {ref} has no visible area to click")
        return c

    async def _click_at(self, x: float, y: float) -> None:
        """A user's click: move there, press, release (trusted input events, in this order on one
        CDP session; sent without waiting for each other's reply)."""
        send = self.tab.cdp.send
        await asyncio.gather(
            send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, "button": "none"}),
            send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x, "y": y, "button": "left",
                                              "buttons": 1, "clickCount": 1}),
            send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x, "y": y, "button": "left",
                                              "buttons": 0, "clickCount": 1}))

    async def act(self, action: GUIAction) -> str:
        """Carry out one action; returns a short note for the next state ('' when none)."""
        page = self.page
        if action.name == "click":
            x, y = await self._centre(action.ref)
            await self._click_at(x, y)
            self.pointer = (x, y)
            return ""
        if action.name == "type":
            status = await self._call(action.ref, _PREPARE_TYPING)
            if status != "ok":
                raise ActionError(f"element {action.ref} is {status}: type() needs a text field")
            if action.text:
                await page.keyboard.type(action.text)
            else:
                await page.keyboard.press("Delete")
            return ""
        if action.name == "select":
            res = await self._call(action.ref, _SELECT, action.text) or {}
            err = res.get("error")
            if err == "not-select":
                raise ActionError(f"element {action.ref} is not a <select> drop-down; click options of "
                                  "other lists instead")
            if err == "no-option":
                raise ActionError(f"no option {action.text!r} in {action.ref}; its options are: "
                                  + ", ".join(repr(o) for o in res.get("options", [])))
            if err:
                raise ActionError(f"cannot select in {action.ref}: {err}")
            return ""
        if action.name == "press":
            try:
                await page.keyboard.press(action.text)
            except Exception as e:  # noqa: BLE001  (unknown key names)
                if "Unknown key" in str(e):
                    raise ActionError(f"unknown key {action.text!r}: use names like Enter, Tab, Escape, "
                                      "ArrowDown, Backspace, or a character") from None
                raise
            return ""
        if action.name == "scroll":
            if self.pointer is None:
                vp = page.viewport_size or {"width": 800, "height": 600}
                self.pointer = (vp["width"] / 2, vp["height"] / 2)
            await page.mouse.move(*self.pointer)
            await page.mouse.wheel(action.dx, action.dy)
            await page.evaluate(_TWO_FRAMES)  # let the scroll land before the page is read
            return ""
        raise ActionError(f"unsupported action {action.name}")

    def take_dialogs(self) -> list[str]:
        out, self.dialogs = self.dialogs, []
        return out


def crop_png(png: bytes, clip: dict) -> bytes:
    """The clip's region (CSS px = device px at scale 1) of a PNG, as a PNG (lossless; fast zlib)."""
    from PIL import Image  # miniwob's dependency, so always there where its pages are

    box = (int(clip["x"]), int(clip["y"]), int(clip["x"] + clip["width"]), int(clip["y"] + clip["height"]))
    out = io.BytesIO()
    Image.open(io.BytesIO(png)).crop(box).save(out, "PNG", compress_level=1)
    return out.getvalue()


def _reraise_if_gone(e: BaseException) -> None:
    """A closed page or browser is infrastructure trouble, not a bad ref: let it through."""
    if "has been closed" in str(e) or "Target closed" in str(e):
        raise e


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
