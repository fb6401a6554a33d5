"""Red-team attacks on the terminal env's grading: an agent that forges its exit
code or its reward must fail. Each test drives a real episode in Docker with scripted replies; the
attack must not succeed."""
import dataclasses
import re
import shutil
import threading
import time

import pytest
from docker import errors as docker_errors

import envs  # noqa: F401
from agents.base import ReplayAgent
from agents.rollout import run_episode
from envs.sandbox import Sandbox
from envs.task_formats import load_suite, load_task_dir
from envs.terminal.env import TerminalEnv
from tests.paths import FIXTURES, ROOT

pytestmark = [pytest.mark.docker, pytest.mark.red_team]
SUITE = load_suite(ROOT / "envs" / "tasks" / "terminal")
AS_AGENT = next(t for t in SUITE if not t.data.get("run_as"))
AS_ROOT = next(t for t in SUITE if t.data.get("run_as") == "root")
HARBOR = load_task_dir(FIXTURES / "harbor" / "hello-harbor")
HARBOR_AS_ROOT = dataclasses.replace(HARBOR, task_id="hello-harbor-root", data={**HARBOR.data, "run_as": "root"})
HARBOR_AS_AGENT = dataclasses.replace(HARBOR, task_id="hello-harbor-agent", data={**HARBOR.data, "run_as": "agent"})
VERIFIER = load_task_dir(FIXTURES / "harbor" / "harbor-verifier-env")  # [verifier].user = "agent"
VERIFIER_AS_AGENT = dataclasses.replace(VERIFIER, task_id="harbor-verifier-as-agent",
                                        data={**VERIFIER.data, "run_as": "agent"})  # the verifier's own user


@pytest.fixture(scope="module")
def env(terminal_config, sandbox_config, terminal_image):
    e = TerminalEnv(terminal_config, sandbox_config,
                    tasks=[AS_AGENT, AS_ROOT, HARBOR, HARBOR_AS_ROOT, HARBOR_AS_AGENT, VERIFIER_AS_AGENT],
                    run_id="pytest-red-team")
    yield e
    e.close()


def bash(cmd: str) -> str:
    return f"```bash\n{cmd}\n```"


def play(env, cfg, task, *commands):
    traj = run_episode(env, ReplayAgent([*map(bash, commands), "DONE"]), task, cfg.system_prompt)
    assert not traj.infra_failure, traj.infra_reason
    return traj


# -- 1. a command cannot forge its exit code --------------------------------------------------------
FORGERIES = [
    # the end marker was the shell function's $2
    "printf '\\n%s 0 /app\\n' \"$2\"; false",
    # every name that looks like a marker, from variables, functions and arguments
    "for m in $(set; declare -f; echo \"$@\" \"${BASH_ARGV[@]}\"); do case $m in *NS*) "
    "printf '\\n%s 0 /app\\n' \"$m\";; esac; done; false",
    # a guessed marker in the old shape
    "printf '\\n__NS_0123456789abcdef 0 /app\\n'; false",
    # what is left on the shell's stdin (the next line) is not readable either
    "read -r -t 1 line <&0; read -r -t 1 line2 </proc/$$/fd/0; printf '\\n%s 0 /app\\n' \"$line\"; false",
]


@pytest.mark.parametrize("attack", FORGERIES, ids=["dollar-2", "scan-shell-state", "guessed", "stdin"])
def test_a_command_cannot_forge_its_exit_code(terminal_image, sandbox_config, attack):
    with Sandbox(terminal_image, sandbox_config, run_id="pytest-red-team") as sb:
        r = sb.exec(attack, timeout=10)
        assert r.exit_code == 1 and not r.timed_out, r
        assert sb.exec("echo next; (exit 3)", timeout=10).exit_code == 3  # the shell is still in step


def test_a_forged_exit_code_does_not_reach_the_step_label(env, terminal_config):
    traj = play(env, terminal_config, AS_AGENT, FORGERIES[0])
    assert traj.steps[0].next_state.exit_code == 1
    assert traj.steps[0].info["step_label"]["exit_ok"] is False


# -- 2. files in the agent's directory cannot shadow the test runner --------------------------------
SHADOW = ("printf 'import sys\\nsys.exit(0)\\n' > {d}/sitecustomize.py; "
          "cp {d}/sitecustomize.py {d}/usercustomize.py; "
          "printf 'import os\\nos._exit(0)\\n' > {d}/conftest.py; "
          "printf '[pytest]\\naddopts = --co\\n' > {d}/pytest.ini")
PYTEST_COPY = "printf 'import sys\\nsys.exit(0)\\n' > /app/pytest.py"


def test_a_shadowing_pytest_in_app_does_not_pass_the_tests(env, terminal_config):
    """Start-up hooks and pytest configs in /app: the tests run from /tests with `python3 -I`."""
    traj = play(env, terminal_config, AS_AGENT, SHADOW.format(d="/app"))
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")
    assert "tampered" not in traj.info  # nothing of the toolchain: the cwd and -I are what stop it


def test_a_pytest_py_in_app_is_tampering(env, terminal_config):
    """A task whose tests `cd /app && python3 -m pytest` would run /app/pytest.py: found before grading."""
    traj = play(env, terminal_config, AS_AGENT, PYTEST_COPY)
    assert traj.outcome == 0.0 and traj.info["tampered"] == ["added /app/pytest.py"]


def test_a_root_agent_cannot_plant_a_conftest_in_tests(env, terminal_config):
    traj = play(env, terminal_config, AS_ROOT, "mkdir -p /tests && " + SHADOW.format(d="/tests"))
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


# -- 3. nothing a root agent left running takes part in grading -------------------------------------
LOOP = ("(setsid nohup bash -c 'while true; do mkdir -p /tests /logs/verifier; "
        "printf \"def test_x():\\n    pass\\n\" > /tests/test_outputs.py; "
        "printf \"#!/bin/bash\\nexit 0\\n\" > /tests/run-tests.sh; "
        "printf \"#!/bin/bash\\nexit 0\\n\" > /tests/test.sh; "
        "echo 1 > /logs/verifier/reward.txt; sleep 0.02; done' > /dev/null 2>&1 < /dev/null &)")
ORPHANS = "sleep 0.3; ps -o ppid=,args= -e | grep -c '^ *1 .*while true'"  # re-parented to pid 1


def test_a_double_forked_loop_cannot_rewrite_the_tests(env, terminal_config):
    traj = play(env, terminal_config, AS_ROOT, LOOP, ORPHANS)
    assert traj.steps[1].next_state.text.strip() == "1"  # the loop left the shell's process tree
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


def test_a_double_forked_loop_cannot_write_the_harbor_reward(env, terminal_config):
    traj = play(env, terminal_config, HARBOR_AS_ROOT, LOOP, ORPHANS)
    assert traj.steps[1].next_state.text.strip() == "1"
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


def test_the_container_survives_the_kill_and_grading_still_works(env, terminal_config):
    """The oracle still passes a root task after its own leftovers (and a fork loop) are killed."""
    from agents.base import OracleAgent

    oracle = OracleAgent()
    oracle.begin(AS_ROOT, env.reference_actions(AS_ROOT))
    traj = run_episode(env, ReplayAgent([bash("(while true; do sleep 0.01 & wait; done) & disown"),
                                         oracle.act([]).text, "DONE"]), AS_ROOT, terminal_config.system_prompt)
    assert not traj.infra_failure and traj.success, traj.info.get("test_output")


# -- 3b. the Harbor reward file is the verifier's: nothing of the agent's writes it first or meanwhile ----
REWARD_WRITER = ("(setsid nohup bash -c 'while true; do echo 1 > /logs/verifier/reward.txt; "
                 "echo \\{\\\"reward\\\": 1\\} > /logs/verifier/reward.json; sleep 0.002; done' "
                 "> /dev/null 2>&1 < /dev/null &)")


def test_a_loop_of_the_verifiers_own_user_cannot_write_the_reward(env, terminal_config):
    """The agent runs as the (non-root) [verifier].user: /logs/verifier, made theirs for the verifier,
    is writable by the loop the agent left running; unguarded, that is reward 1.0 for a task not done."""
    traj = play(env, terminal_config, VERIFIER_AS_AGENT, REWARD_WRITER, "sleep 0.3; pgrep -c -f 'while true'")
    # it was running (2 while the loop has forked a `sleep` that has not yet exec'd: seen once under load)
    assert traj.steps[1].next_state.text.strip() in ("1", "2"), traj.steps[1].next_state.text
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


def test_a_reward_planted_in_a_writable_logs_dir_is_not_read(env, terminal_config):
    """A non-root agent whose image left /logs writable plants /logs/verifier (its own) with a reward
    and keeps a loop rewriting it: the verifier's directory is made afresh, by root, in a root-owned
    /logs, when grading starts."""
    env.reset(options={"task_id": HARBOR_AS_AGENT.task_id})
    env.unwrapped._sandbox.run("mkdir -p /logs && chmod 1777 /logs")  # as an image might leave it
    agent = [bash("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && " + REWARD_WRITER),
             # the loop truncates then writes: a read can fall between the two (CI saw '' once)
             bash("sleep 0.3; for i in $(seq 200); do r=$(cat /logs/verifier/reward.txt); "
                  "[ -n \"$r\" ] && break; done; echo \"$r\""), "DONE"]
    infos = []
    for reply in agent:
        obs, reward, terminated, truncated, info = env.step(reply)
        assert not info.get("infra_failure"), info
        infos.append(info)
    assert infos[1]["next_state"].text.strip() == "1"  # planted, and the agent's loop still runs as grading starts
    assert terminated and reward == 0.0, info.get("test_output")


# -- 3c. the boundary: what test.sh itself runs is the verifier (Harbor's semantics) -----------------
def verifier_runs_the_agents_program(tmp_path, after_reward: str):
    """A Harbor task whose test.sh runs the agent's /app/answer.sh, writes the reward from its answer,
    then runs `after_reward` (a clean-up step, as many test.sh files have)."""
    d = tmp_path / "runs-answer"
    shutil.copytree(FIXTURES / "harbor" / "hello-harbor", d)
    (d / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\nout=$(bash /app/answer.sh < /dev/null)\n"
        "if [ \"$out\" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n" + after_reward + "\n")
    return load_task_dir(d)


def run_answer(cfg, sandbox_config, task, answer: str):
    e = TerminalEnv(cfg, sandbox_config, tasks=[task], run_id="pytest-red-team-verifier-runs")
    try:
        write = f"cat > /app/answer.sh <<'__EOF__'\n{answer}\n__EOF__"
        return play(e, cfg, task, write)
    finally:
        e.close()


def test_a_reward_the_agents_program_writes_is_overwritten_by_the_verdict(tmp_path, terminal_config,
                                                                          sandbox_config):
    """The agent's program, run by test.sh, writes reward 1 and answers wrong: test.sh's own verdict,
    written after the program returned, is what is read."""
    task = verifier_runs_the_agents_program(tmp_path, "true")
    traj = run_answer(terminal_config, sandbox_config, task, "echo 1 > /logs/verifier/reward.txt; echo 41")
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


def test_boundary_a_process_the_verifier_started_can_rewrite_the_reward(tmp_path, terminal_config,
                                                                       sandbox_config):
    """THE OPEN BOUNDARY (docs/reward-integrity.md): code test.sh runs is the verifier, with its user
    and its files, as under Harbor. The agent's program leaves a process that waits for test.sh's
    verdict and replaces it: reward 1.0 for a wrong answer. No place the verifier can write is out of
    its children's reach, in this container or a fresh one; only a task whose tests do not run the
    agent's code as the verifier is safe from this. If this test fails, the boundary moved: update
    docs/reward-integrity.md."""
    task = verifier_runs_the_agents_program(tmp_path, "sleep 1")
    daemon = ("setsid nohup sh -c 'until [ \"$(cat /logs/verifier/reward.txt 2>/dev/null)\" = 0 ]; do sleep 0.01; "
              "done; echo 1 > /logs/verifier/reward.txt' > /dev/null 2>&1 < /dev/null & echo 41")
    traj = run_answer(terminal_config, sandbox_config, task, daemon)
    assert traj.outcome == 1.0, traj.info.get("test_output")


def slow_verifier_task(tmp_path, limit_s: float):
    task = verifier_runs_the_agents_program(tmp_path, "true")
    return dataclasses.replace(task, data={**task.data, "test_timeout_s": limit_s})


# the first run of the agent's program is slow (as on a loaded machine), the next is not
SLOW_ONCE = "if [ -f /tmp/ran-once ]; then echo 42; else touch /tmp/ran-once; sleep 30; fi"


@pytest.mark.slow
def test_a_verifier_killed_at_its_limit_is_named_with_its_exit_code(tmp_path, terminal_config, sandbox_config):
    traj = run_answer(terminal_config, sandbox_config, slow_verifier_task(tmp_path, 3), SLOW_ONCE)
    assert traj.outcome == 0.0 and not traj.infra_failure
    assert traj.info["verifier_timed_out"] is True and traj.info["regraded"] is False
    assert traj.info["test_exit_code"] == 137 and "killed at its 3 s limit" in traj.info["test_output"]


@pytest.mark.slow
def test_a_run_can_regrade_a_verifier_timeout_once(tmp_path, terminal_config, sandbox_config):
    cfg = dataclasses.replace(terminal_config, regrade_verifier_timeouts=True)
    traj = run_answer(cfg, sandbox_config, slow_verifier_task(tmp_path, 3), SLOW_ONCE)
    assert traj.outcome == 1.0 and traj.info["regraded"] is True and traj.info["verifier_timed_out"] is False


# -- 4. a root agent cannot rewrite what grades it ---------------------------------------------------
TOOLCHAIN_ATTACKS = {
    "python-shim": "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3.11",  # every python3 exits 0
    "pth-exit": "echo 'import os; os._exit(0)' > /usr/lib/python3/dist-packages/zz.pth",  # runs at start-up
    "path-shadow": "cp /bin/true /usr/local/bin/python3",  # earlier on PATH than /usr/bin/python3
}


@pytest.mark.parametrize("attack", TOOLCHAIN_ATTACKS.values(), ids=TOOLCHAIN_ATTACKS.keys())
@pytest.mark.parametrize("task", [AS_ROOT, HARBOR_AS_ROOT], ids=["terminal-bench", "harbor"])
def test_a_rewritten_grading_toolchain_scores_zero_and_is_named(env, terminal_config, task, attack):
    traj = play(env, terminal_config, task, attack)
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")
    assert traj.info["tampered"] and "grading toolchain" in traj.info["test_output"]


def test_the_toolchain_attack_would_pass_without_the_check(env, terminal_config, monkeypatch):
    """The attack is real: with the integrity check switched off, the shimmed python passes the tests."""
    monkeypatch.setattr(TerminalEnv, "_toolchain_tampering", lambda self, sb: [])
    traj = play(env, terminal_config, AS_ROOT, TOOLCHAIN_ATTACKS["python-shim"])
    assert traj.success and traj.outcome == 1.0, traj.info.get("test_output")


# -- 4b. pytest reads its config only from the task's /tests ------------------------------------------
PYTEST_CONFIG_ATTACKS = {
    # pytest walked up from /tests to /: the root's ini made it only collect (exit 0)
    "root-ini-collect-only": "printf '[pytest]\\naddopts = --co\\n' > /pytest.ini",
    # ... and the root's conftest then counted as the tests' own and rewrote the exit status
    "root-conftest-exit-0": "printf '[pytest]\\n' > /pytest.ini; printf 'import pytest\\n"
                            "@pytest.hookimpl(trylast=True)\\ndef pytest_sessionfinish(session, exitstatus):\\n"
                            "    session.exitstatus = 0\\n' > /conftest.py",
}


@pytest.mark.parametrize("attack", PYTEST_CONFIG_ATTACKS.values(), ids=PYTEST_CONFIG_ATTACKS.keys())
@pytest.mark.parametrize("task", [AS_ROOT, HARBOR_AS_ROOT], ids=["terminal-bench", "harbor"])
def test_a_pytest_config_planted_above_the_tests_is_not_read(env, terminal_config, task, attack):
    traj = play(env, terminal_config, task, attack)
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")


def test_the_pytest_config_attack_would_pass_without_the_hardening(env, terminal_config, monkeypatch):
    """The attack is real: with pytest left to find its own config, the planted one passes the tests."""
    import envs.terminal.env as terminal

    monkeypatch.setattr(terminal, "grading_environment", lambda tests_dir: {})
    traj = play(env, terminal_config, AS_ROOT, PYTEST_CONFIG_ATTACKS["root-ini-collect-only"])
    assert traj.success and traj.outcome == 1.0, traj.info.get("test_output")


# -- 4c. what no list names: the grader's closure (the paths tracing the verifier found it touches) ----
CLOSURE_ATTACKS = {
    # the file `sitecustomize` links to, in /etc: run at every interpreter start, even under -I
    "etc-sitecustomize": "echo 'import os; os._exit(0)' >> /etc/python3.11/sitecustomize.py",
    # a zip Python probes first on sys.path: its argparse is the one pytest imports
    "stdlib-zip": "cd /root && echo 'import os; os._exit(0)' > argparse.py && python3 -c \"import zipfile; "
                  "z = zipfile.ZipFile('/usr/lib/python311.zip', 'w'); z.write('argparse.py'); z.close()\"",
    # the module sitecustomize tries to import, new in a directory Python lists
    "probed-module": "echo 'import os; os._exit(0)' > /usr/lib/python3/dist-packages/apport_python_hook.py",
    # a pytest11 plugin added to pytest's own entry points (pluggy loads every one at start-up)
    "entry-point-in-pytests-dist-info": "printf '[pytest11]\\nzz = zzplug\\n' >> "
        "/usr/lib/python3/dist-packages/pytest-7.2.1.dist-info/entry_points.txt && "
        "echo 'import os; os._exit(0)' > /usr/local/lib/python3.11/dist-packages/zzplug.py",
}


@pytest.mark.parametrize("attack", CLOSURE_ATTACKS.values(), ids=CLOSURE_ATTACKS.keys())
def test_a_change_to_what_the_verifier_touches_scores_zero_and_is_named(env, terminal_config, attack):
    traj = play(env, terminal_config, AS_ROOT, attack)  # (the Harbor fixture's verifier is bash alone: no Python)
    assert not traj.success and traj.outcome == 0.0, traj.info.get("test_output")
    assert traj.info["tampered"] and "grading" in traj.info["test_output"], traj.info.get("test_output")


@pytest.mark.parametrize("name", ["etc-sitecustomize", "stdlib-zip", "probed-module"])
def test_the_closure_attacks_pass_the_toolchain_list_alone(terminal_config, sandbox_config, terminal_image, name):
    """The attacks are real, and the list does not name them: without the closure they score 1.0."""
    e = TerminalEnv(dataclasses.replace(terminal_config, grader_closure=False), sandbox_config,
                    tasks=[AS_ROOT], run_id="pytest-red-team")
    try:
        traj = play(e, terminal_config, AS_ROOT, CLOSURE_ATTACKS[name])
    finally:
        e.close()
    assert traj.success and traj.outcome == 1.0 and "tampered" not in traj.info, traj.info.get("test_output")


ODD_FILES = {  # things named like what the check reads, that cannot be read as a file
    "dir-entry-points": "mkdir -p /usr/local/lib/python3.11/dist-packages/x-1.dist-info/entry_points.txt",
    "dangling-entry-points": "mkdir -p /usr/local/lib/python3.11/dist-packages/x-1.dist-info && "
                             "ln -s /nowhere /usr/local/lib/python3.11/dist-packages/x-1.dist-info/entry_points.txt",
    "fifo-entry-points": "mkdir -p /usr/local/lib/python3.11/dist-packages/x-1.dist-info && "
                         "mkfifo /usr/local/lib/python3.11/dist-packages/x-1.dist-info/entry_points.txt",
}


@pytest.mark.parametrize("attack", ODD_FILES.values(), ids=ODD_FILES.keys())
def test_an_odd_file_where_the_check_reads_is_tampering_not_an_unscored_episode(env, terminal_config, attack):
    traj = play(env, terminal_config, AS_ROOT, attack)  # (play: never infra)
    assert not traj.success and traj.outcome == 0.0 and traj.info["tampered"], traj.info.get("test_output")


# -- faults: a container killed while the tests run is infra, never the agent's failure -------------
class KillWhileTestsRun:
    """Stands in for `Sandbox.run`: `delay` s after the task's tests start, the container is killed;
    `landed` says whether the kill came before the tests returned."""

    def __init__(self, sandbox, container, delay: float):
        self.real, self.container, self.delay = sandbox.run, container, delay
        self.timer = self.killed_at = self.started_at = self.returned_at = None

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        try:
            self.container.kill()
        except docker_errors.APIError:
            pass  # already gone

    def __call__(self, command: str, *args, **kw):
        if not command.startswith(("bash /tests/run-tests.sh", "bash /tests/test.sh")):
            return self.real(command, *args, **kw)
        self.timer = threading.Timer(self.delay, self.kill)
        self.started_at = time.monotonic()
        self.timer.start()
        try:
            return self.real(command, *args, **kw)
        finally:
            self.returned_at = time.monotonic()

    @property
    def landed(self) -> bool:
        """The kill came well before the tests returned (a kill in their last 0.1 s may come after the
        result, which is then the tests' own)."""
        self.timer.join()
        return self.killed_at is not None and self.killed_at < self.returned_at - 0.1


def kills_during_grading(env, docker, task) -> list[tuple]:
    """(share, infra?, test exit code) for each kill that landed while `task`'s tests ran."""
    env.reset(options={"task_id": task.task_id})
    sandbox = env.unwrapped._sandbox
    sandbox.run = timing = KillWhileTestsRun(sandbox, None, delay=1e9)  # an unkilled grading, timed
    env.step("DONE")
    timing.timer.cancel()
    took = timing.returned_at - timing.started_at
    landed = []
    for share in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):  # kills at different moments while the tests run
        env.reset(options={"task_id": task.task_id})
        sandbox = env.unwrapped._sandbox
        container = docker.containers.get(sandbox.container_id)
        sandbox.run = killer = KillWhileTestsRun(sandbox, container, delay=share * took)
        obs, reward, terminated, truncated, info = env.step("DONE")
        if killer.landed:
            landed.append((share, bool(info.get("infra_failure")), info.get("test_exit_code")))
    assert landed, f"no kill landed while the tests ran (they took {took:.2f} s): the test proved nothing"
    return landed


@pytest.mark.slow
def test_a_container_killed_during_grading_is_an_infra_failure_not_a_failed_task(env, docker):
    """`docker kill` while the tests run ends the exec (126, 137) a moment before the container's state
    says it stopped; before the fix every such kill was filed as the agent's failed task (5 of 9)."""
    landed = kills_during_grading(env, docker, AS_AGENT)
    assert all(infra for _, infra, _ in landed), landed


@pytest.mark.slow
def test_a_container_killed_while_a_harbor_verifier_runs_is_an_infra_failure(tmp_path, terminal_config,
                                                                             sandbox_config, docker):
    """The same for Harbor's test.sh (a verifier that takes a second), whose reward file is then read
    from a dead container."""
    task = verifier_runs_the_agents_program(tmp_path, "sleep 1")
    e = TerminalEnv(terminal_config, sandbox_config, tasks=[task], run_id="pytest-red-team-kill-harbor")
    try:
        landed = kills_during_grading(e, docker, task)
    finally:
        e.close()
    assert all(infra for _, infra, _ in landed), landed


# -- disk fill: bounded, named, and the agent's own failure ----------------------------------------
HARBOR_NESTED = load_task_dir(FIXTURES / "harbor" / "harbor-image-user")  # workdir /home/builder/work
FILL = "dd if=/dev/zero of={path} bs=1M count=64; du -m {path}"
FILLS = {  # where an agent writes: its workdir, /tmp, /var/tmp, its home; a root agent anywhere
    "tmp": (AS_AGENT, "/tmp/fill"), "workdir": (AS_AGENT, "/app/fill"), "var-tmp": (AS_AGENT, "/var/tmp/fill"),
    "home": (AS_AGENT, "~/fill"), "root-anywhere": (AS_ROOT, "/root/fill"), "harbor": (HARBOR, "fill"),
    "harbor-workdir-in-home": (HARBOR_NESTED, "fill"),
}


@pytest.fixture(scope="module")
def small_disk_env(terminal_config, sandbox_config, terminal_image):
    e = TerminalEnv(terminal_config, dataclasses.replace(sandbox_config, disk_limit="16m"),
                    tasks=[AS_AGENT, AS_ROOT, HARBOR, HARBOR_NESTED], run_id="pytest-red-team-disk")
    yield e
    e.close()


@pytest.mark.parametrize("task,path", FILLS.values(), ids=FILLS.keys())
def test_filling_the_disk_stops_at_the_limit_with_a_clear_error(small_disk_env, terminal_config, task, path):
    """Unlimited, `dd` writes 3 GB into /tmp at 1.1 GB/s (the host's disk, `df` shows). Here: at most
    sandbox.disk_limit, the next state names the limit, and the episode is graded as the agent's."""
    traj = play(small_disk_env, terminal_config, task, FILL.format(path=path))
    text = traj.steps[0].next_state.text
    written = re.search(r"^(\d+)\s+\S*fill$", text, re.M)
    assert written and int(written.group(1)) <= 17, text  # MiB, of the 64 asked for
    assert "disk limit" in text and "16m" in text, text
    assert traj.terminated and traj.outcome == 0.0 and not traj.infra_failure


def _new_mib(text: str) -> int:
    m = re.search(r"^new (\d+)$", text, re.M)
    assert m, text
    return int(m.group(1)) >> 20


COUNT_NEW = "echo new $(cat /opt/fill* 2>/dev/null | wc -c)"


def test_many_files_each_below_the_limit_cannot_fill_the_containers_disk(small_disk_env, terminal_config):
    """A root agent writes 4 MiB files into /opt (on the container's own disk, not a scratch mount;
    each file is under RLIMIT_FSIZE). Unwatched, all 50 land (200 MiB against a 16m limit). Here
    the writable layer is watched; past the limit every process is killed, the command's next state
    names the limit, and the episode goes on as the agent's: deleting files makes room again."""
    writer = "for i in $(seq 1 50); do head -c 4M /dev/zero > /opt/fill$i; sleep 0.05; done"
    traj = play(small_disk_env, terminal_config, AS_ROOT, writer, COUNT_NEW,
                "rm -f /opt/fill*; head -c 1M /dev/zero > /opt/fill-small && echo room again")
    first, count, again = (s.next_state.text for s in traj.steps[:3])
    assert "disk limit" in first and "16m" in first, first
    assert _new_mib(count) <= 16 + 48, count  # the limit, plus what a poll interval lets through
    assert "room again" in again and "disk limit" not in again, again
    assert traj.terminated and traj.outcome == 0.0 and not traj.infra_failure


def test_a_background_writer_is_stopped_between_commands(small_disk_env, terminal_config):
    """The same files written by a detached loop that outlives its command: it is killed too, and the
    agent's next command says why."""
    writer = ("setsid nohup sh -c 'for i in $(seq 1 50); do head -c 4M /dev/zero > /opt/fill$i; sleep 0.05; done' "
              ">/dev/null 2>&1 & echo started")
    traj = play(small_disk_env, terminal_config, AS_ROOT, writer, "sleep 4", COUNT_NEW)
    texts = [s.next_state.text for s in traj.steps[:3]]
    assert "started" in texts[0]
    assert any("disk limit" in t for t in texts[1:]), texts
    assert _new_mib(texts[2]) <= 16 + 48, texts[2]
    assert not traj.infra_failure


@pytest.mark.slow
def test_a_non_root_agents_writer_is_stopped_while_and_after_the_tests_run(small_disk_env, terminal_config):
    """A non-root agent's processes keep running while its tests run (a task may check a service it
    started); one of them fills /run/lock (world-writable, on the container's disk) from then on.
    Were the watch to stop when grading begins, all 200 MiB would land. Past the limit the agent's
    user's processes are killed, not the tests."""
    writer = ("setsid nohup sh -c 'sleep 1; for i in $(seq 1 50); do head -c 4M /dev/zero > /run/lock/fill$i; "
              "sleep 0.05; done' > /dev/null 2>&1 < /dev/null & echo started")
    traj = play(small_disk_env, terminal_config, AS_AGENT, writer)
    assert "started" in traj.steps[0].next_state.text and traj.terminated and not traj.infra_failure
    time.sleep(4)  # the writer's 50 files take 2.5 s from 1 s after its command
    sandbox = small_disk_env.unwrapped._sandbox
    # The watch acts between looks, so a fast writer gets past the limit: ~24-28 MiB on a quiet machine,
    # 76 MiB once in a clean-clone `make test` on 2 busy cores. The bound is what tells
    # "stopped" from the 200 MiB an unwatched writer lands. A daemon with disk quotas refuses the write instead
    # (tests/envs/sandbox/test_disk_ceiling.py); what the watch lets through is in docs/reward-integrity.md.
    assert sandbox._layer_size() <= (16 + 112) << 20, sandbox._layer_size() >> 20


def test_the_workdir_keeps_its_files_owner_and_mode(small_disk_env, terminal_config):
    """The size-limited workdir and home start with the image's files, as the agent's."""
    traj = play(small_disk_env, terminal_config, HARBOR_NESTED, "stat -c '%U %a %n' . ~ /tmp; ls -A")
    lines = traj.steps[0].next_state.text.split("\n")
    assert lines[:3] == ["builder 755 .", "builder 755 /home/builder", "root 1777 /tmp"], lines


# -- caps per reply: however many blocks, one reply is one command under one timeout -----------------
def test_a_reply_of_endless_blocks_costs_one_command_timeout_and_capped_bytes(terminal_config, sandbox_config,
                                                                              terminal_image):
    """The terminal env's caps per reply: the blocks of a reply run as one command,
    so tool time is `command_timeout_s` (plus the kill) and bytes are `output_cap_bytes`, whatever
    the reply holds."""
    e = TerminalEnv(terminal_config, dataclasses.replace(sandbox_config, command_timeout_s=2), tasks=[AS_AGENT],
                    run_id="pytest-red-team-caps")
    try:
        e.reset(options={"task_id": AS_AGENT.task_id})
        reply = "\n".join([bash("yes | head -c 50000000; sleep 100")] * 20)
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = e.step(reply)
        # the timeout, the kill's wait (2 s), at worst a new shell, on a loaded machine; not 20 x 100 s
        assert time.monotonic() - t0 < 2 + 2 + 10
        ns = info["next_state"]
        assert ns.timed_out and not info.get("infra_failure") and not terminated
        assert len(ns.text.encode()) < sandbox_config.output_cap_bytes + 500 and ns.truncated_bytes > 0
        assert len(obs) < terminal_config.obs_max_chars + 500
    finally:
        e.close()
