"""The page as the agent reads it: Chromium's own accessibility tree, rendered as indented text
with element refs, and the compact diff between two renderings (the GUI next state).

The tree comes from CDP `Accessibility.getFullAXTree` (the browser's real roles, names and
states, as BrowserGym reads them), not from a re-implementation in page JavaScript. Rendering
rules, chosen so that a small model reads little and still sees every element it can act on:
- ignored nodes vanish and their children move up; inline text boxes and line breaks are dropped;
- a nameless wrapper (generic, none, ...) with element children vanishes the same way; one that
  holds only text becomes a single line with that text (clickable spans keep a ref that way);
- text equal to its parent's name is not repeated; a textbox shows its value after ':'.

Refs are `e<N>`, given in order of first appearance and kept for the whole episode by a
`RefTable`: the same element keeps its ref on every step, so an unchanged element renders as an
unchanged line and the diff shows only what the action changed. Numbering depends only on the
page and the actions, so two runs of a deterministic page give the same refs (the oracle relies
on this).

Format of a line: `  - role "name" [state] [ref=e7]: text`.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

_TRANSPARENT = {"generic", "none", "presentation", "LayoutTable", "LayoutTableRow", "LayoutTableCell",
                "Section", "Div", "Unknown"}
_DROP = {"InlineTextBox", "LineBreak", "ListMarker"}
_TEXT = {"StaticText"}
_VALUE_ROLES = {"textbox", "searchbox", "combobox", "spinbutton", "slider", "textarea", "TextField"}
_NO_CHILDREN = {"textbox", "searchbox", "spinbutton", "slider"}  # their children are the editor's innards
_NO_REF = {"RootWebArea", "WebArea", "MenuListOption", "MenuListPopup"}
MAX_TEXT = 300


@dataclass
class RefTable:
    """backendDOMNodeId <-> ref for one episode."""

    by_node: dict[int, str] = field(default_factory=dict)
    by_ref: dict[str, int] = field(default_factory=dict)

    def ref_for(self, backend_id: int) -> str:
        ref = self.by_node.get(backend_id)
        if ref is None:
            ref = f"e{len(self.by_node) + 1}"
            self.by_node[backend_id] = ref
            self.by_ref[ref] = backend_id
        return ref


@dataclass
class _Item:
    role: str
    name: str = ""
    value: str = ""
    props: list[str] = field(default_factory=list)
    backend_id: int | None = None
    children: list["_Item | str"] = field(default_factory=list)


def _val(d: dict | None) -> object:
    return (d or {}).get("value")


def _props(node: dict) -> list[str]:
    p = {q["name"]: _val(q.get("value")) for q in node.get("properties", [])}
    out = []
    if p.get("checked") in ("true", True):
        out.append("checked")
    elif p.get("checked") == "mixed":
        out.append("mixed")
    if p.get("pressed") in ("true", True):
        out.append("pressed")
    if p.get("selected") is True:
        out.append("selected")
    if p.get("expanded") is True:
        out.append("expanded")
    elif p.get("expanded") is False:
        out.append("collapsed")
    if p.get("disabled") is True:
        out.append("disabled")
    if p.get("required") is True:
        out.append("required")
    if p.get("invalid") not in (None, "false", False):
        out.append("invalid")
    if p.get("readonly") is True and node.get("role", {}).get("value") in _VALUE_ROLES:
        out.append("readonly")
    if p.get("level") is not None and node.get("role", {}).get("value") == "heading":
        out.append(f"level={p['level']}")
    if p.get("focused") is True:
        out.append("focused")
    return out


def _squash(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _build(nodes: list[dict], frames: dict[int, list[dict]] | None = None) -> list[_Item | str]:
    """AX nodes (as CDP returns them) -> a tree of items; frames maps an iframe's backend id to
    its document's nodes, grafted in place of the iframe's (empty) subtree."""
    by_id = {n["nodeId"]: n for n in nodes}
    frames = frames or {}
    root = next((n for n in nodes if "parentId" not in n), nodes[0]) if nodes else None

    def visit(node: dict, seen: set) -> list[_Item | str]:
        if node["nodeId"] in seen:
            return []
        seen.add(node["nodeId"])
        role = str(_val(node.get("role")) or "")
        kids: list[_Item | str] = []
        backend = node.get("backendDOMNodeId")
        if role == "Iframe" and backend in frames:
            kids = _build(frames[backend], frames)
        elif role not in _DROP and role not in _NO_CHILDREN:
            for cid in node.get("childIds", []):
                child = by_id.get(cid)
                if child is not None:
                    kids.extend(visit(child, seen))
        if node.get("ignored") or role in ("RootWebArea", "WebArea"):
            return kids
        if role in _DROP:
            return []
        if role in _TEXT:
            name = str(_val(node.get("name")) or "")
            return [name] if name.strip() else []
        item = _Item(role=role, name=_squash(str(_val(node.get("name")) or "")), props=_props(node),
                     backend_id=backend, children=kids)
        if role in _VALUE_ROLES:
            item.value = _squash(str(_val(node.get("value")) or ""))
        return [item]

    return visit(root, set()) if root else []


def _join_texts(parts: list[str]) -> str:
    return _squash("".join(parts))


def _emit(items: list[_Item | str], depth: int, refs: RefTable, out: list[str]) -> None:
    texts: list[str] = []

    def flush():
        if texts:
            t = _join_texts(texts)
            if t:
                out.append(f"{'  ' * depth}- text: {t}")
            texts.clear()

    for it in items:
        if isinstance(it, str):
            texts.append(it)
            continue
        only_text = all(isinstance(c, str) for c in it.children)
        if it.role in _TRANSPARENT and not it.name and not it.props and not only_text:
            # a wrapper: its children take its place (text around it stays in order)
            inner: list[_Item | str] = list(it.children)
            for c in inner:
                if isinstance(c, str):
                    texts.append(c)
                else:
                    flush()
                    _emit([c], depth, refs, out)
            continue
        flush()
        line = f"{'  ' * depth}- {it.role}"
        if it.name:
            line += ' "' + it.name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for p in it.props:
            line += f" [{p}]"
        if it.backend_id is not None and it.role not in _NO_REF:
            line += f" [ref={refs.ref_for(it.backend_id)}]"
        text = _join_texts([c for c in it.children if isinstance(c, str)]) if only_text else ""
        if it.value:
            text = it.value
        elif text == it.name:
            text = ""
        if text:
            line += f": {text}"
        if it.role in _TRANSPARENT and not it.name and not it.props and not text and not it.children:
            continue  # an empty wrapper says nothing
        out.append(line)
        if not only_text:
            _emit(it.children, depth + 1, refs, out)
    flush()


def render_tree(nodes: list[dict], refs: RefTable, frames: dict[int, list[dict]] | None = None) -> str:
    out: list[str] = []
    _emit(_build(nodes, frames), 0, refs, out)
    return "\n".join(out)


# -- reading a rendering back (solvers, ref checks) ------------------------------------------------
_LINE = re.compile(r'^(?P<indent>\s*)- (?P<role>[^\s"\[:]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?'
                   r'(?P<props>(?: \[[^\]=]+(?:=[^\]]*)?\])*?)(?: \[ref=(?P<ref>e\d+)\])?(?:: (?P<text>.*))?$')


@dataclass(frozen=True)
class Line:
    depth: int
    role: str
    name: str
    props: tuple[str, ...]
    ref: str | None
    text: str


def parse_tree(text: str) -> list[Line]:
    lines = []
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        props = tuple(p for p in re.findall(r"\[([^\]]+)\]", m.group("props") or ""))
        name = (m.group("name") or "").replace('\\"', '"').replace("\\\\", "\\")
        lines.append(Line(len(m.group("indent")) // 2, m.group("role"), name, props, m.group("ref"),
                          m.group("text") or ""))
    return lines


def refs_in(text: str) -> set[str]:
    return set(re.findall(r"\[ref=(e\d+)\]", text))


# -- the next state --------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeDiff:
    added: int
    removed: int
    text: str  # "+ line" / "- line", at most max_lines of them

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def diff_trees(old: str, new: str, max_lines: int) -> TreeDiff:
    a = [ln.strip()[2:] for ln in old.splitlines()]
    b = [ln.strip()[2:] for ln in new.splitlines()]
    out: list[str] = []
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out += [f"- {ln}" for ln in a[i1:i2]]
        out += [f"+ {ln}" for ln in b[j1:j2]]
        removed += i2 - i1
        added += j2 - j1
    if len(out) > max_lines:
        out = out[:max_lines] + [f"... ({len(out) - max_lines} more changed lines)"]
    return TreeDiff(added, removed, "\n".join(out))
