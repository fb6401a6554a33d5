"""Fast tests, no Docker: action parsing, types, task formats, next-state rendering."""

import pytest

from envs.sandboxed import render_next_state
from envs.spaces import FreeText
from envs.task_formats import TaskFormatError, load_suite, load_task_dir
from envs.terminal.actions import parse_action
from nextstate.types import NextState, Step, Trajectory
from tests.paths import FIXTURES, ROOT

FIXTURES = FIXTURES
SUITE = ROOT / "envs" / "tasks" / "terminal"


@pytest.mark.parametrize("reply,command,done", [
    ("```bash\nls -la\n```", "ls -la", False),
    ("Let me look.\n```sh\ncd /app\nls\n```\nthen more", "cd /app\nls", False),
    ("```bash\necho a\n```\n```bash\necho b\n```", "echo a\necho b", False),
    ("ls /app", "ls /app", False),
    ("`ls /app`", "ls /app", False),
    ("DONE", None, True),
    ("All finished.\nDONE", None, True),
    ("```bash\ntouch x\n```\nDONE", "touch x", True),
    ("```bash\necho DONE\n```", "echo DONE", False),  # DONE inside a block is a command, not the end
])
def test_parse_action_valid(reply, command, done):
    a = parse_action(reply)
    assert a.error is None and a.command == command and a.done == done


@pytest.mark.parametrize("reply,reason", [
    ("", "empty"), ("   \n ", "empty"),
    ("I think we should\nlist the files first\nand then look", "no command"),
    ("\x00\x01\x02binary\x03\x04", "not readable"),
    ("\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1bok", "not readable"),
])
def test_parse_action_errors_are_explained(reply, reason):
    a = parse_action(reply)
    assert a.command is None and not a.done and reason in a.error


def test_next_state_rendering_caps_and_marks():
    ns = NextState(kind="terminal", text="x" * 5000, exit_code=3, cwd="/tmp", timed_out=True)
    out = render_next_state(ns, 1000)
    assert out.startswith("[exit code 3] [cwd /tmp] [timed out]")
    assert "characters cut" in out and len(out) < 1200
    assert render_next_state(NextState(kind="error", text="bad"), 100) == "[error] bad"


def test_trajectory_roundtrip():
    ns = NextState(kind="terminal", text="hi", exit_code=0, cwd="/app")
    step = Step(index=0, prompt_messages=[{"role": "user", "content": "x"}], action_text="ls",
                next_state=ns, action_token_ids=[1, 2], rollout_logprobs=[-0.1, -0.2], reward=1.0)
    t = Trajectory(task_id="t", env_id="e", steps=[step], outcome=1.0, success=True)
    back = Trajectory.from_dict(t.to_dict())
    assert back == t and back.n_tokens == 2 and back.steps[0].next_state.exit_code == 0


def test_next_state_is_frozen_and_its_init_sets_every_field():
    """NextState's hand-written __init__ (speed) must stay in step with its fields."""
    import dataclasses
    import inspect

    params = list(inspect.signature(NextState.__init__).parameters)[1:]
    assert params == [f.name for f in dataclasses.fields(NextState)]
    ns = NextState("tool", "ok", fields={"calls": ["f"]})
    assert dataclasses.asdict(ns) == {"kind": "tool", "text": "ok", "exit_code": None, "cwd": None,
                                      "timed_out": False, "truncated_bytes": 0, "fields": {"calls": ["f"]}}
    assert NextState("user", "x").fields == {} and NextState("user", "x").fields is not NextState("user", "x").fields
    assert ns == NextState.from_dict(ns.to_dict())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ns.text = "changed"


def test_free_text_space_accepts_any_text():
    space = FreeText(seed=0)
    assert space.contains("ünïcode ```bash\n\x00```") and not space.contains(3)
    assert all(space.contains(space.sample()) for _ in range(20))


def test_bundled_suite_is_complete():
    tasks = load_suite(SUITE)
    assert len(tasks) >= 30
    assert {t.split for t in tasks} == {"train", "test"}
    for t in tasks:
        assert t.data["solution"], f"{t.task_id} has no reference solution"
        assert t.difficulty in {"easy", "medium", "hard"}, t.task_id
        assert t.tags, f"{t.task_id} has no tags"
    assert len({t.task_id for t in tasks}) == len(tasks)


def test_harbor_task_loads():
    t = load_task_dir(FIXTURES / "harbor" / "hello-harbor")
    assert t.data["format"] == "harbor" and t.instruction.startswith("Write the text")
    assert t.difficulty == "easy" and t.tags[0] == "file-operations"
    assert t.data["test_timeout_s"] == 30.0


def test_bad_task_dirs_give_clear_errors(tmp_path):
    with pytest.raises(TaskFormatError, match="neither"):
        load_task_dir(tmp_path)
    (tmp_path / "task.yaml").write_text("instruction: do it\n")
    with pytest.raises(TaskFormatError, match="missing Dockerfile"):
        load_task_dir(tmp_path)
    (tmp_path / "task.yaml").write_text("instruction: [unclosed\n")
    with pytest.raises(TaskFormatError, match="invalid YAML"):
        load_task_dir(tmp_path)
    with pytest.raises(TaskFormatError, match="does not exist"):
        load_suite(tmp_path / "nope")
