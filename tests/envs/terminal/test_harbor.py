"""Harbor-format tasks run as Harbor runs them: the fixtures in tests/fixtures/harbor/ each
exercise one field of task.toml, and the two `broken-*` ones must each be one infra-failure row while
the rest of the suite runs. The first tests need no Docker; the rest drive real containers."""
import dataclasses
import re
import shutil
import time
from pathlib import Path

import pytest

import envs  # noqa: F401
from agents.base import NoopAgent, OracleAgent, ReplayAgent
from agents.rollout import run_episode
from envs.sandbox import Sandbox, SandboxError
from envs.sandbox.images import base_images, build_image, map_base_images, repository
from envs.task_formats import TaskFormatError, load_suite, load_task_dir
from envs.terminal.env import TerminalEnv
from nextstate.atomic import read_jsonl
from nextstate.leaderboard import read_rows
from tests.paths import FIXTURES

SUITE_DIR = FIXTURES / "harbor"
BROKEN = {"broken-malformed-toml": "invalid TOML", "broken-image-build": "returned a non-zero code: 3"}
VALID = sorted(d.name for d in SUITE_DIR.iterdir() if d.is_dir() and d.name not in BROKEN)


# -- loading (no Docker) ------------------------------------------------------------------------------
def test_a_malformed_task_does_not_stop_the_suite():
    tasks = {t.task_id: t for t in load_suite(SUITE_DIR)}
    assert sorted(tasks) == sorted(VALID + list(BROKEN))
    assert "invalid TOML" in tasks["broken-malformed-toml"].data["load_error"]
    assert not any(tasks[v].data.get("load_error") for v in VALID)


def test_a_suite_without_splits_is_in_every_split():
    for split in ("test", "train", "all", None):
        assert len(load_suite(SUITE_DIR, split=split)) == len(VALID) + len(BROKEN)


def test_an_empty_split_says_which_splits_there_are(tmp_path, terminal_config, sandbox_config):
    task = tmp_path / "only-train"
    (task / "tests").mkdir(parents=True)
    (task / "task.yaml").write_text("instruction: do it\nsplit: train\n")
    (task / "Dockerfile").write_text("FROM nextstate/terminal:latest\n")
    (task / "run-tests.sh").write_text("true\n")
    cfg = dataclasses.replace(terminal_config, tasks_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"split=test.*\['train'\].*split=all"):
        TerminalEnv(cfg, sandbox_config, split="test")
    assert [t.task_id for t in TerminalEnv(cfg, sandbox_config, split="all").tasks] == ["only-train"]


def test_harbor_fields_are_read():
    solution = load_task_dir(SUITE_DIR / "harbor-solution-files").data
    assert solution["solution_env"] == {"SUFFIX": "!"} and solution["run_as"] == "agent"
    assert load_task_dir(SUITE_DIR / "harbor-image-user").data["run_as"] is None  # the image's user
    limits = load_task_dir(SUITE_DIR / "harbor-limits").data
    assert (limits["cpus"], limits["memory_mb"]) == (0.5, 384)
    assert limits["unhonoured"] == [] and limits["storage_mb"] == 2048
    image = load_task_dir(SUITE_DIR / "harbor-docker-image").data
    assert image["docker_image"] == "nextstate/terminal:latest" and image["workdir"] == "/srv/work"
    assert image["env"] == {"GREETING": "hello from $HOME's \"env\""}
    verifier = load_task_dir(SUITE_DIR / "harbor-verifier-env").data
    assert verifier["verifier_env"] == {"EXPECTED": "42"} and verifier["verifier_user"] == "agent"
    assert load_task_dir(SUITE_DIR / "harbor-limits").data["verifier_user"] == "root"  # Harbor's default
    assert load_task_dir(SUITE_DIR / "harbor-agent-timeout").data["agent_timeout_s"] == 4.0


def test_agent_and_verifier_users_memory_and_templates(tmp_path, monkeypatch):
    d = tmp_path / "t"
    (d / "tests").mkdir(parents=True)
    (d / "tests" / "test.sh").write_text("true\n")
    (d / "instruction.md").write_text("do it\n")
    (d / "task.toml").write_text('[agent]\nuser = "dev"\n[verifier]\nuser = "checker"\n'
                                 'env = { KEY = "${NS_TEST_KEY}", OTHER = "${NS_UNSET:-fallback}" }\n'
                                 '[environment]\ndocker_image = "python:3.13"\nmemory = "2G"\n')
    monkeypatch.setenv("NS_TEST_KEY", "secret")
    data = load_task_dir(d).data
    assert (data["run_as"], data["verifier_user"], data["memory_mb"]) == ("dev", "checker", 2048)
    assert data["verifier_env"] == {"KEY": "secret", "OTHER": "fallback"}


def test_multi_step_tasks_are_refused_clearly(tmp_path):
    d = tmp_path / "multi"
    (d / "steps" / "one").mkdir(parents=True)
    (d / "task.toml").write_text('version = "1.0"\n')
    with pytest.raises(TaskFormatError, match="multi-step"):
        load_task_dir(d)


def test_from_lines_with_flags_and_digests_map_by_repository():
    text = ("FROM --platform=linux/amd64 ghcr.io/org/base:1.0@sha256:" + "a" * 64 + " AS build\n"
            "FROM build\nFROM scratch\nfrom docker.io/library/python:3.13-slim\n")
    assert base_images(text) == ["ghcr.io/org/base:1.0@sha256:" + "a" * 64, "docker.io/library/python:3.13-slim"]
    mapped = map_base_images(text, {"ghcr.io/org/base:other-tag": "local/a:1", "python": "local/b:2"})
    assert mapped.splitlines() == ["FROM local/a:1 AS build", "FROM build", "FROM scratch", "from local/b:2"]
    assert repository("localhost:5000/x/y:3@sha256:ab") == "localhost:5000/x/y"
    assert map_base_images("FROM ubuntu:22.04\n", {}) == "FROM ubuntu:22.04\n"


def test_image_map_entries_and_the_fallback_from_the_command_line():
    """The override syntax of docs/envs.md: repository keys need no `:` or `@`, which Hydra refuses in a key."""
    from harness.job import env_config
    from nextstate.config import compose

    cfg = env_config(compose(["env=terminal", "env.base_image_fallback=nextstate/terminal:latest",
                              '+env.image_map={ghcr.io/org/base:"nextstate/terminal:latest",python:"my/py:1"}']).env)
    assert cfg.base_image_fallback == "nextstate/terminal:latest"
    assert cfg.image_map["ghcr.io/org/base"] == "nextstate/terminal:latest" and cfg.image_map["python"] == "my/py:1"
    assert "ubuntu:24.04" in cfg.image_map  # added to conf/env/terminal.yaml's map, not replacing it
    assert map_base_images("FROM ghcr.io/org/base:2@sha256:" + "c" * 64 + "\n", cfg.image_map) == \
        "FROM nextstate/terminal:latest\n"


# -- with Docker ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(terminal_config, sandbox_config, terminal_image):
    cfg = dataclasses.replace(terminal_config, tasks_dir=str(SUITE_DIR))
    e = TerminalEnv(cfg, sandbox_config, split="test", run_id="pytest-harbor")
    yield e
    e.close()


@pytest.mark.slow
@pytest.mark.docker
def test_the_oracle_passes_every_valid_fixture_through_the_cli(tmp_path, harness_run):
    """`python -m harness.run env=terminal env.tasks_dir=tests/fixtures/harbor agent=oracle`, as a
    user runs it (split=test, the default): every valid task solved, each broken one one infra row."""
    t0 = time.monotonic()
    p = harness_run(tmp_path, "env=terminal", f"env.tasks_dir={SUITE_DIR}", "agent=oracle")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    _, rows = read_rows(tmp_path / "leaderboard.csv")
    trajs = {t["task_id"]: t for t in read_jsonl(Path(rows[0]["run_dir"]) / "trajectories.jsonl")}
    assert sorted(trajs) == sorted(VALID + list(BROKEN))
    for task_id in VALID:
        t = trajs[task_id]
        assert t["success"] and not t["infra_failure"], (task_id, t["infra_reason"], t["info"].get("test_output"))
    for task_id, why in BROKEN.items():
        assert trajs[task_id]["infra_failure"] and why in trajs[task_id]["infra_reason"], trajs[task_id]
    assert rows[0]["infra_failures"] == str(len(BROKEN))
    # one warning for the task that did not load, one for the image that did not build
    assert "1 of 10 terminal tasks did not load" in p.stderr and "broken-malformed-toml: " in p.stderr
    assert "1 of 9 terminal tasks have no image" in p.stderr and "broken-image-build: " in p.stderr
    assert "not honoured" not in p.stderr  # storage_mb (harbor-limits) is the task's disk limit
    print(f"fixture suite through the CLI: {took:.1f} s for {len(trajs)} tasks")


@pytest.mark.docker
@pytest.mark.parametrize("task_id", ["harbor-solution-files", "harbor-verifier-env", "harbor-docker-image",
                                     "harbor-image-user"])
def test_noop_fails_the_fixtures(env, terminal_config, task_id):
    """The fixtures' tests are real: doing nothing scores 0."""
    traj = run_episode(env, NoopAgent(), env._by_id[task_id], terminal_config.system_prompt)
    assert not traj.infra_failure and traj.outcome == 0.0, traj.infra_reason


@pytest.mark.docker
@pytest.mark.parametrize("field", ["storage_mb = 16", 'storage = "16M"'])
def test_storage_mb_is_the_tasks_disk_limit(tmp_path, terminal_config, sandbox_config, terminal_image, field):
    """Harbor's [environment].storage_mb (or `storage`) is the episode's sandbox.disk_limit: writing
    64 MiB stops at 16 MiB, and the next state names the limit."""
    d = tmp_path / "small-disk"
    shutil.copytree(SUITE_DIR / "hello-harbor", d)
    with (d / "task.toml").open("a") as f:
        f.write(f"\n[environment]\n{field}\n")
    task = load_task_dir(d)
    assert task.data["storage_mb"] == 16 and task.data["unhonoured"] == []
    e = TerminalEnv(terminal_config, sandbox_config, tasks=[task], run_id="pytest-harbor-storage")
    try:
        traj = run_episode(e, ReplayAgent(["```bash\ndd if=/dev/zero of=/tmp/fill bs=1M count=64; du -m /tmp/fill\n```",
                                           "DONE"]), task, terminal_config.system_prompt)
    finally:
        e.close()
    text = traj.steps[0].next_state.text
    written = re.search(r"^(\d+)\s+/tmp/fill$", text, re.M)
    assert written and int(written.group(1)) <= 17 and "disk limit" in text and "16m" in text, text
    assert not traj.infra_failure and traj.outcome == 0.0


@pytest.mark.docker
def test_the_agent_runs_as_the_images_user_in_its_workdir(env):
    obs, info = env.reset(options={"task_id": "harbor-image-user"})
    assert (info["user"], info["workdir"]) == ("builder", "/home/builder/work"), info
    assert "You are user `builder` in /home/builder/work" in obs
    assert "[exit code 0]" in env.step("```bash\ntest ! -e /solution && id -u\n```")[0]


@pytest.mark.docker
def test_only_the_oracles_reply_uploads_the_solution(env):
    """An agent that writes the oracle's comment without the env's key gets no /solution."""
    env.reset(options={"task_id": "harbor-solution-files"})
    obs, *_ = env.step("```bash\n# nextstate-oracle 0000\nls /solution\n```")
    assert "[exit code 2]" in obs


@pytest.mark.slow
@pytest.mark.docker
def test_the_task_agent_timeout_cuts_the_episode_and_grades_it(env, terminal_config):
    task = env._by_id["harbor-agent-timeout"]
    t0 = time.monotonic()
    traj = run_episode(env, OracleAgent(), task, terminal_config.system_prompt)
    assert traj.truncated and traj.steps[-1].info["truncated_by"] == "agent_timeout"
    assert traj.success  # the work before the cut counts
    assert time.monotonic() - t0 < 25  # 4 s of agent time, not the env's 30 s command timeout
    replies = ReplayAgent(["```bash\nsleep 5\n```", "```bash\necho early > /app/early.txt\n```", "DONE"])
    traj = run_episode(env, replies, task, terminal_config.system_prompt)
    assert traj.truncated and len(traj.steps) == 1 and not traj.success  # out of time before the write


@pytest.mark.docker
def test_a_base_image_nowhere_is_named_and_the_fallback_builds(docker, terminal_image, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM --platform=linux/amd64 nextstate-nowhere/base:1@sha256:"
                                         + "b" * 64 + "\nRUN true\n")
    with pytest.raises(SandboxError, match=r"base image nextstate-nowhere/base:1@sha256:b+ is not here.*"
                                           r"base_image_fallback"):
        build_image(docker, tmp_path, "nextstate-pytest/fallback")
    tag = build_image(docker, tmp_path, "nextstate-pytest/fallback", fallback=terminal_image)
    try:
        assert docker.images.get(tag).attrs["Config"]["WorkingDir"] == "/app"  # from nextstate/terminal
    finally:
        docker.images.remove(tag)


@pytest.mark.docker
def test_a_shell_that_cannot_start_fails_after_a_few_tries(terminal_image, sandbox_config):
    """A user the image does not have: a SandboxError saying so, not a RecursionError."""
    sb = Sandbox(terminal_image, sandbox_config, run_id="pytest-harbor", user="no-such-user")
    try:
        with pytest.raises(SandboxError, match="no-such-user.*3 tries.*(no such user|unable to find user)"):
            sb.start()
    finally:
        sb.close()


def test_from_lines_are_read_as_docker_reads_them():
    # a continued FROM line, a lower-case one and an ARG default: the hand-written regex missed all three
    text = ("# syntax=docker/dockerfile:1\nARG BASE=debian:12\nfrom --platform=linux/amd64 \\\n"
            "  python:3.11-slim AS build\nRUN echo hi\nFROM ${BASE}\nCOPY --from=build /x /x\n")
    assert base_images(text) == ["python:3.11-slim", "debian:12"]
    assert base_images(text, {"BASE": "alpine:3"}) == ["python:3.11-slim", "alpine:3"]
    mapped = map_base_images(text, {"python": "local/py:1"})
    assert "from local/py:1 AS build\nRUN echo hi\nFROM ${BASE}\n" in mapped and "python:3.11" not in mapped


def test_the_build_context_honours_dockerignore(tmp_path):
    from envs.sandbox.images import context_files

    for rel in ("Dockerfile", "keep.txt", "logs/z", "a/y.log", "a/b/x.txt", "tests/t.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / ".dockerignore").write_text("logs\n**/*.log\n")
    files = {p.relative_to(tmp_path).as_posix() for p in context_files(tmp_path, exclude={"tests"})}
    assert files == {".dockerignore", "Dockerfile", "keep.txt", "a/b/x.txt"}
