"""`disk_limit` as a ceiling the daemon enforces (envs/sandbox/quota.py), on a real second Docker
daemon that scripts/ensure_docker.sh starts on a btrfs data root, whatever the default daemon is:
however fast the writer, the daemon refuses the write past the limit (the watch, on overlay2, let
109 MiB of this writer against a 16m limit); a disk the agent filled fails the agent's grading, never
the harness's."""
import dataclasses

import pytest

import envs  # noqa: F401
from agents.base import ReplayAgent
from agents.rollout import run_episode
from envs.sandbox import Sandbox, SandboxFullError, docker_client, quota
from envs.sandbox.btrfs_daemon import btrfs_daemon as start_btrfs_daemon
from envs.sandbox.btrfs_daemon import why_not
from envs.sandbox.disk import scratch_mounts
from envs.task_formats import load_suite
from envs.terminal.env import TerminalEnv
from tests.paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.red_team]
MiB = 1 << 20
AS_ROOT = next(t for t in load_suite(ROOT / "envs" / "tasks" / "terminal") if t.data.get("run_as") == "root")
# 100 files of 4 MiB, each below RLIMIT_FSIZE, as fast as the disk takes them (~0.4 s)
WRITER = ("for i in $(seq 1 100); do head -c 4M /dev/zero > /opt/fill$i || break; done; "
          "echo wrote $(du -sm /opt | cut -f1)")


@pytest.fixture(scope="module")
def btrfs_daemon(terminal_image, terminal_config):
    """A Docker daemon on a 4 GB btrfs loop file, holding the terminal images; gone afterwards."""
    if why_not():
        pytest.skip(why_not())
    with start_btrfs_daemon(images=(terminal_config.base_image, terminal_image)) as (client, host):
        yield client, host, terminal_image


@pytest.fixture
def blind_watch(monkeypatch):
    """The disk watch of a daemon too busy to answer: it looks once an hour."""
    import envs.sandbox.container as container

    class Blind(container.DiskWatch):
        def __init__(self, size, kill, limit):
            super().__init__(size, kill, limit, interval=3600)

    monkeypatch.setattr(container, "DiskWatch", Blind)


def _written(text: str) -> int:
    return int(text.rsplit("wrote ", 1)[1].split()[0])


@pytest.mark.slow
def test_the_daemon_refuses_the_write_past_the_limit_however_fast_the_writer(btrfs_daemon, sandbox_config,
                                                                             blind_watch):
    client, _, image = btrfs_daemon
    quota.enforced(docker_client())  # the default daemon asked first, as in a whole session (one URL for both)
    assert quota.enforced(client)
    config = dataclasses.replace(sandbox_config, disk_limit="16m", user="root")
    with Sandbox(image, config, run_id="pytest-disk-ceiling", client=client) as sb:
        assert sb._disk_watch is None  # the daemon holds the limit: nothing to watch
        r = sb.exec(WRITER)
        assert "Disk quota exceeded" in r.output and "disk limit" in r.output and "16m" in r.output, r.output
        slack = int(client.images.get(image).attrs["Size"]) // 20 // MiB + 4  # btrfs counts the image's metadata
        assert 16 - 4 <= _written(r.output) <= 16 + slack, r.output
        assert "room again" in sb.exec("rm -f /opt/fill*; head -c 8M /dev/zero > /opt/again && echo room again").output
    # the control: no ceiling on the same daemon, and a watch that never looks: all of it lands
    with Sandbox(image, dataclasses.replace(config, disk_ceiling=False), run_id="pytest-disk-ceiling",
                 client=client) as sb:
        assert _written(sb.exec(WRITER).output) == 400


@pytest.mark.slow
def test_a_copy_into_a_full_container_is_the_agents_not_infra(btrfs_daemon, sandbox_config):
    client, _, image = btrfs_daemon
    config = dataclasses.replace(sandbox_config, disk_limit="16m", user="root")
    with Sandbox(image, config, run_id="pytest-disk-ceiling", client=client) as sb:
        sb.exec(WRITER)
        with pytest.raises(SandboxFullError, match="disk is full"):
            sb.upload_bytes(b"x" * (8 * MiB), "/tests/big.bin")


@pytest.mark.slow
def test_a_disk_the_agent_filled_fails_its_grading_not_the_harness(btrfs_daemon, terminal_config, sandbox_config,
                                                                   monkeypatch):
    """A root agent fills its disk to the limit and says DONE: the tests cannot be copied in, and
    the episode is graded 0 as the agent's, with the reason, not filed as an infra failure."""
    client, host, _ = btrfs_daemon
    config = dataclasses.replace(sandbox_config, disk_limit="16m")
    built = TerminalEnv(terminal_config, config, tasks=[AS_ROOT], run_id="pytest-disk-ceiling")
    image = built.image_for(AS_ROOT)  # built on the default daemon: a layer commit on btrfs walks the whole tree
    built.close()
    seeded = scratch_mounts(docker_client(), image, ("/app", "/tmp", "/var/tmp", "/home"), "16m").image
    for name in (image, seeded):  # (the scratch mounts are made once per process: the btrfs env reuses them)
        client.images.load(docker_client().images.get(name).save(named=name))
    monkeypatch.setenv("DOCKER_HOST", host)
    env = TerminalEnv(terminal_config, config, tasks=[AS_ROOT], run_id="pytest-disk-ceiling")
    try:
        traj = run_episode(env, ReplayAgent([f"```bash\n{WRITER}\n```", "DONE"]), AS_ROOT,
                           terminal_config.system_prompt)
    finally:
        env.close()
    assert "Disk quota exceeded" in traj.steps[0].next_state.text
    assert not traj.infra_failure and traj.terminated and traj.outcome == 0.0, traj.infra_reason
    assert "disk is full" in traj.info["test_output"], traj.info
