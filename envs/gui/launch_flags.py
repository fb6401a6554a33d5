"""Chromium launch flags.

Every context opens a browser window, and this Chromium preloads two omnibox pop-up
WebUIs per window (plus a spare renderer), which cost ~1 s of CPU per episode on a 2-core machine
(measured: 1.6 s -> 0.6 s per open+close without them). Headless automation never shows them, so
`launch_args` disables those features, merged into Playwright's own `--disable-features` list
(Chromium keeps only the last such switch, so appending ours would drop Playwright's).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import playwright

# Per-window extras that a headless page never uses (see the module docstring).
DISABLED_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "SpareRendererForSitePerProcess")
_FLAG = "--disable-features="


@functools.cache
def playwright_disabled_features() -> tuple[str, ...] | None:
    """The features Playwright's own launch disables (its `disabledFeatures`, read from the driver
    bundle this Playwright ships), or None where that list cannot be found."""
    lib = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    for src in (lib / "coreBundle.js", lib / "server" / "chromium" / "chromiumSwitches.js"):
        try:
            m = re.search(r"disabledFeatures = \[(.*?)\]", src.read_text(encoding="utf-8"), re.S)
        except OSError:
            continue
        if m:
            body = re.sub(r"//[^\n]*", "", m.group(1))
            return tuple(re.findall(r'"([^"]+)"', body))
    return None


def launch_args(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(args, ignore_default_args) for Playwright's launch: the caller's args with one merged
    `--disable-features` (Playwright's list, the caller's, DISABLED_FEATURES) replacing
    Playwright's. Unchanged when Playwright's list cannot be read (ours would drop it)."""
    defaults = playwright_disabled_features()
    if defaults is None:
        return list(args), []
    extra = [f for a in args if a.startswith(_FLAG) for f in a[len(_FLAG):].split(",") if f]
    merged = list(dict.fromkeys([*defaults, *extra, *DISABLED_FEATURES]))
    rest = [a for a in args if not a.startswith(_FLAG)]
    return rest + [_FLAG + ",".join(merged)], [_FLAG + ",".join(defaults)]
