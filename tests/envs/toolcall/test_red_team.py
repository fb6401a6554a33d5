"""Red-team attacks on the `run_python` tool: one episode's code leaves files for the next (answers, a
planted module, anywhere it can write) or a process that outlives the episode by changing its pid; the
next episode must start from the image as it is."""

import pytest

from envs.toolcall.env import ToolCallEnv
from tests.envs.toolcall.helpers import SUITE
from tests.envs.toolcall.helpers import run_python as run

pytestmark = [pytest.mark.docker, pytest.mark.red_team]
TASK = "py-fibonacci"


@pytest.fixture(scope="module")
def env(env_config, sandbox_config, terminal_image):
    # no attack here waits for the limit; the memory kill (~2 s idle) must come inside it on a loaded machine
    e = ToolCallEnv(env_config("toolcall", "env.python_timeout_s=20"), sandbox_config, tasks=SUITE,
                    run_id="pytest-toolcall-red-team")
    yield e
    e.close()


LEAVE = """import os, pathlib
home = pathlib.Path(os.path.expanduser('~'))
for p in [home / 'x', home / '.cache' / 'answers.txt', pathlib.Path('/tmp/y'), pathlib.Path('/var/tmp/z'),
          pathlib.Path('/dev/shm/w'), pathlib.Path('/app/v')]:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text('the answer is 42')
print('left', home)"""

LOOK = """import os, pathlib
home = pathlib.Path(os.path.expanduser('~'))
found = [str(p) for p in [home / 'x', home / '.cache' / 'answers.txt', pathlib.Path('/tmp/y'),
         pathlib.Path('/var/tmp/z'), pathlib.Path('/dev/shm/w'), pathlib.Path('/app/v')] if p.exists()]
print('found', found, sorted(os.listdir(home)))"""


def test_the_next_episode_cannot_see_what_the_last_one_left(env):
    env.reset(options={"task_id": TASK})
    before = run(env, LOOK)["output"]  # the image's own home, as the first episode sees it
    assert "found []" in before
    out = run(env, LEAVE)
    assert out["exit_code"] == 0 and "left /home/" in out["output"], out
    assert "found []" not in run(env, LOOK)["output"]  # within the episode the files are there
    env.reset(options={"task_id": TASK})
    after = run(env, LOOK)["output"]
    assert after == before, (before, after)  # a clean home (the image's dotfiles stay) and /tmp


# each generation writes the answer, starts the next in a new session (a new pid) and exits: a loop
# that kills the user's pids it sees can miss the one just born, which writes the file again
HOP = """import subprocess
script = 'echo 42 > /dev/shm/hop; sleep 0.05; setsid bash -c "$0" "$0" > /dev/null 2>&1 & exit'
subprocess.Popen(['setsid', 'bash', '-c', script, script], start_new_session=True)
print('hopping')"""


def test_a_process_that_keeps_changing_its_pid_does_not_reach_the_next_episode(env):
    env.reset(options={"task_id": TASK})
    assert "hopping" in run(env, HOP)["output"]
    look = "import time, os; time.sleep(0.5); print(os.path.exists('/dev/shm/hop'))"
    assert run(env, look)["output"].strip() == "True"
    env.reset(options={"task_id": TASK})
    out = run(env, look)
    assert out["output"].strip() == "False", out


def test_a_memory_bomb_is_reported_as_out_of_memory_not_as_a_timeout(env):
    """A memory kill (137 well inside the time limit) names memory, so the agent learns the right lesson."""
    env.reset(options={"task_id": TASK})
    result = run(env, "x = bytearray(8 * 1024**3)")
    assert result["exit_code"] == 137 and "out of memory" in result["error"], result


FILL = """import os
for d in ['/tmp', os.path.expanduser('~')]:
    try:
        for i in range(64):
            with open(f'{d}/fill{i}', 'wb') as f:
                f.write(b'0' * (1 << 20))
    except OSError as e:
        print(d, e.strerror)
    print(d, sum(os.path.getsize(f'{d}/{n}') for n in os.listdir(d) if n.startswith('fill')) >> 20)"""


def test_filling_the_disk_stops_at_the_limit_with_a_clear_error(env_config, sandbox_config, terminal_image):
    """Many files, none too large: /tmp and the home hold sandbox.disk_limit each, then ENOSPC and a
    note naming the limit; the episode goes on (before: 64 MiB each, and on to the host's disk)."""
    import dataclasses

    e = ToolCallEnv(env_config("toolcall", "env.python_timeout_s=20"),
                    dataclasses.replace(sandbox_config, disk_limit="16m"), tasks=SUITE,
                    run_id="pytest-toolcall-red-team-disk")
    try:
        e.reset(options={"task_id": TASK})
        out = run(e, FILL)
        lines = out["output"].splitlines()
        full = [ln.split()[0] for ln in lines if ln.endswith("No space left on device")]
        assert full[0] == "/tmp" and full[1].startswith("/home/"), out
        assert all(int(ln.split()[-1]) <= 16 for ln in lines if len(ln.split()) == 2), out
        assert "disk limit" in out["output"] and "16m" in out["output"]
        e.reset(options={"task_id": TASK})  # the next episode starts with the room back
        assert run(e, "import shutil; print(shutil.disk_usage('/tmp').used < 1 << 20)")["output"] == "True\n"
    finally:
        e.close()
