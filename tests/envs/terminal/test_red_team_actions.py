"""Red-team: a reply's blocks are read in order, whatever language a block names. The failure guarded
against: the closing fence of a ```python block read as the opening of a bash block, so the ```bash
block after it is dropped (the reply is "no command found", or runs without it)."""
import pytest

from envs.terminal.actions import parse_action

pytestmark = pytest.mark.red_team


@pytest.mark.parametrize("reply,command,done", [
    ("```python\nprint(1)\n```\n```bash\necho hi\n```", "echo hi", False),
    ("```python\nprint(1)\n```\n```bash\necho hi\n```\nDONE", "echo hi", True),
    ("```bash\necho a\n```\n```python\nprint(1)\n```\n```sh\necho b\n```", "echo a\necho b", False),
    ("```json\n{}\n```\n```\necho plain\n```", "echo plain", False),
])
def test_a_bash_block_after_another_languages_block_is_run(reply, command, done):
    a = parse_action(reply)
    assert (a.error, a.command, a.done) == (None, command, done)


def test_a_reply_with_only_a_python_block_is_told_so():
    a = parse_action("```python\nprint(1)\n```")
    assert a.command is None and "python" in a.error
