"""The GUI env's pure parts, no browser: the action language, the tree rendering and its diff,
the app success check, the task suites."""
import pytest

from envs.gui.a11y import RefTable, diff_trees, parse_tree, refs_in, render_tree
from envs.gui.actions import GUIAction, parse_reply
from envs.gui.apps import check, load_app_tasks
from envs.gui.launch_flags import DISABLED_FEATURES, launch_args, playwright_disabled_features
from envs.gui.miniwob import html_dir, load_miniwob_tasks
from nextstate.config import REPO_ROOT


@pytest.mark.parametrize("reply, want", [
    ("click(e12)", GUIAction("click", ref="e12")),
    ('click("e12")', GUIAction("click", ref="e12")),
    ('I will press it.\n```\ntype(e3, "Buy milk")\n```', GUIAction("type", ref="e3", text="Buy milk")),
    ('type(e3, "say \\"hi\\", (ok)")', GUIAction("type", ref="e3", text='say "hi", (ok)')),
    ('select(e9, "Express ($9.99)")', GUIAction("select", ref="e9", text="Express ($9.99)")),
    ('press("Enter")', GUIAction("press", text="Enter")),
    ("press(Tab)", GUIAction("press", text="Tab")),
    ("scroll(0, -300)", GUIAction("scroll", dx=0, dy=-300)),
    ('type(e4, 250)', GUIAction("type", ref="e4", text="250")),
])
def test_actions_parse(reply, want):
    parsed = parse_reply(reply)
    assert parsed.error is None and parsed.action == want and not parsed.done
    assert parse_reply(want.render()).action == want  # the canonical spelling parses back


@pytest.mark.parametrize("reply", ["done()", "DONE", "All set.\ndone()"])
def test_done(reply):
    parsed = parse_reply(reply)
    assert parsed.done and parsed.action is None and parsed.error is None


def test_action_then_done():
    parsed = parse_reply("click(e5)\ndone()")
    assert parsed.action == GUIAction("click", ref="e5") and parsed.done


@pytest.mark.parametrize("reply, fragment", [
    ("", "empty"),
    ("\x00\x01\x02", "not readable"),
    ("I think the button is nice", "no action found"),
    ("click(e1) click(e2)", "one action per reply"),
    ("done() click(e1)", "must come last"),
    ("click(12)", "not an element ref"),
    ("click(#submit)", "cannot parse"),
    ('type(e3)', "takes 2 argument"),
    ('click(e3, "x")', "takes 1 argument"),
    ('type(e3, "unterminated)', "unbalanced"),
    ("scroll(up, 3)", "two numbers"),
    ('click(ref=e3)', "plain call"),
    ('press("")', "key name"),
])
def test_bad_actions_are_errors(reply, fragment):
    parsed = parse_reply(reply)
    assert parsed.error and fragment in parsed.error and parsed.action is None


def _ax(node_id, role, name="", children=(), backend=None, ignored=False, props=None, value=None, parent=None):
    n = {"nodeId": str(node_id), "role": {"value": role}, "name": {"value": name}, "ignored": ignored,
         "childIds": [str(c) for c in children], "properties": [
             {"name": k, "value": {"value": v}} for k, v in (props or {}).items()]}
    if backend is not None:
        n["backendDOMNodeId"] = backend
    if value is not None:
        n["value"] = {"value": value}
    if parent is not None:
        n["parentId"] = str(parent)
    return n


# A page as CDP's Accessibility.getFullAXTree returns it: root, an ignored wrapper, a generic div
# with a text-only span (a clickable link-like span), a checkbox, a filled textbox, a button.
PAGE = [
    _ax(1, "RootWebArea", "Demo", [2], backend=1),
    _ax(2, "generic", "", [3, 4, 6, 7, 8], backend=2, ignored=True, parent=1),
    _ax(3, "StaticText", "Pick one:", [], backend=30, parent=2),
    _ax(4, "generic", "", [5], backend=4, parent=2),
    _ax(5, "StaticText", "tellus", [], backend=50, parent=4),
    _ax(6, "checkbox", "Remember me", [], backend=6, props={"checked": "true", "focusable": True}, parent=2),
    _ax(7, "textbox", "User", [9], backend=7, value="ada", parent=2),
    _ax(8, "button", "Go", [10], backend=8, parent=2),
    _ax(9, "generic", "", [], backend=90, parent=7),  # the textbox's inner editor: not shown
    _ax(10, "StaticText", "Go", [], backend=100, parent=8),
]


def test_render_tree_and_refs_are_stable():
    refs = RefTable()
    text = render_tree(PAGE, refs)
    assert text.splitlines() == [
        "- text: Pick one:",
        "- generic [ref=e1]: tellus",
        '- checkbox "Remember me" [checked] [ref=e2]',
        '- textbox "User" [ref=e3]: ada',
        '- button "Go" [ref=e4]',
    ]
    assert refs_in(text) == {"e1", "e2", "e3", "e4"}
    # the button disappears and a new element appears: old refs keep their numbers
    page2 = [n for n in PAGE if n["nodeId"] != "8"] + [_ax(11, "link", "Next", [], backend=11, parent=2)]
    page2[1] = dict(page2[1], childIds=["3", "4", "6", "7", "11"])
    text2 = render_tree(page2, refs)
    assert '- link "Next" [ref=e5]' in text2 and '- textbox "User" [ref=e3]: ada' in text2
    d = diff_trees(text, text2, max_lines=10)
    assert (d.added, d.removed) == (1, 1)
    assert d.text.splitlines() == ['- button "Go" [ref=e4]', '+ link "Next" [ref=e5]']
    assert not diff_trees(text, text, 10).changed


def test_parse_tree_reads_rendering_back():
    lines = parse_tree('- heading "Todo" [level=1] [ref=e1]\n  - checkbox "Say \\"hi\\"" [checked] [ref=e2]\n'
                       "  - generic [ref=e3]: some text\n- text: plain")
    assert [(ln.depth, ln.role, ln.name, ln.ref) for ln in lines] == [
        (0, "heading", "Todo", "e1"), (1, "checkbox", 'Say "hi"', "e2"), (1, "generic", "", "e3"),
        (0, "text", "", None)]
    assert lines[1].props == ("checked",) and lines[2].text == "some text"


def test_diff_is_capped():
    old = "\n".join(f"- button \"b{i}\" [ref=e{i}]" for i in range(50))
    d = diff_trees(old, "", max_lines=5)
    assert d.removed == 50 and d.text.splitlines()[-1] == "... (45 more changed lines)"


def test_app_check():
    state = {"items": [{"title": "a", "done": True}, {"title": "b"}], "saved": None, "n": 2.0, "body": "Hi, Approved!"}
    assert check(state, {"items.0.title": "a", "items.-1.title": "b", "n": 2, "body": {"$contains": "approved"},
                         "items": {"$len": 2}, "missing": {"$absent": True}}) == []
    assert check(state, {"items": {"$set": [{"title": "b"}, {"done": True, "title": "a"}]}}) == []
    failed = check(state, {"items.0.done": False, "saved.x": 1, "items.5": {"$absent": False}})
    assert len(failed) == 3 and "items.0.done" in failed[0] and "(missing)" in failed[1]


def test_launch_args_merge_disabled_features():
    """Chromium keeps only the last --disable-features: ours must carry Playwright's list along."""
    defaults = playwright_disabled_features()
    assert defaults and "PaintHolding" in defaults
    args, ignore = launch_args(("--headless", "--disable-features=Foo,Bar"))
    flags = [a for a in args if a.startswith("--disable-features=")]
    assert len(flags) == 1 and "--headless" in args
    merged = flags[0].split("=", 1)[1].split(",")
    assert set(merged) == {*defaults, "Foo", "Bar", *DISABLED_FEATURES} and len(merged) == len(set(merged))
    assert ignore == ["--disable-features=" + ",".join(defaults)]  # Playwright's own flag, dropped


def test_suites_are_complete():
    miniwob = load_miniwob_tasks("train")
    apps = load_app_tasks(REPO_ROOT / "envs" / "tasks" / "gui", split=None)
    pages = {p.stem for p in (html_dir() / "miniwob").glob("*.html")}
    assert {t.task_id for t in miniwob} >= pages and len(pages) >= 125
    assert {"flight.AA", "flight.Alaska"} <= {t.task_id for t in miniwob}
    assert len({t.tags[1] for t in apps}) >= 10 and len(apps) >= 10
    assert all(t.data["solution"] and t.data["expect"] for t in apps)
