"""The oracle's replies for a SWE instance: its gold patch sent through the env's own actions.

With `mode="edit"` each changed file becomes one reply: an ```edit block whose SEARCH/REPLACE
pairs are the hunks (old side = context + removed lines, new side = context + added lines), a
```write block for a new file, `rm` for a deleted one. A patch the edit actions cannot express
(binary files, renames, mode changes) and `mode="git_apply"` send the patch to `git apply` in
one ```bash block instead. The last reply submits.
"""
from __future__ import annotations

import shlex

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from envs.swe.actions import render_replace, render_shell, render_write


def _git_apply_reply(patch: str) -> str:
    delim = "__NS_GOLD_PATCH__"
    return render_shell(f"git apply --verbose - <<'{delim}'\n{patch.rstrip(chr(10))}\n{delim}")


def _edit_replies(patch: str) -> list[str] | None:
    try:
        files = PatchSet(patch)
    except UnidiffParseError:
        return None
    replies = []
    for pf in files:
        if pf.is_binary_file or pf.is_rename:
            return None
        if pf.is_added_file:
            replies.append(render_write(pf.path, "".join(ln.value for h in pf for ln in h if ln.is_added)))
        elif pf.is_removed_file:
            replies.append(render_shell(f"rm -- {shlex.quote(pf.path)}"))
        else:
            pairs = [("".join(ln.value for ln in h if ln.is_context or ln.is_removed),
                      "".join(ln.value for ln in h if ln.is_context or ln.is_added)) for h in pf]
            if any(not old for old, _ in pairs):
                return None  # a hunk without old lines has nothing to anchor a SEARCH on
            replies.append(render_replace(pf.path, pairs))
    return replies


def reference_replies(patch: str, submit_token: str = "SUBMIT", mode: str = "edit") -> list[str]:
    if not patch.strip():
        return [submit_token]
    replies = _edit_replies(patch) if mode == "edit" else None
    return [*(replies if replies is not None else [_git_apply_reply(patch)]), submit_token]
