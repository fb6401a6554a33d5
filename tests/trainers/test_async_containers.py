"""A `mode=async` run on a Docker env leaves no container behind: a rollout actor killed with -9 mid-run
(an OOM kill) is restarted by Ray and the run goes on; its containers, which it never closed, are
removed with the run's others when the run stops (SIGTERM, as Ctrl-C or a scheduler would)."""
import os
import signal
import subprocess
import sys
import time

import docker
import pytest

from tests.paths import ROOT

# an async run on Ray: ~45 s
pytestmark = [pytest.mark.docker, pytest.mark.model, pytest.mark.timeout(600), pytest.mark.slow]


def _containers(client, run_id):
    return client.containers.list(all=True, filters={"label": f"nextstate.run={run_id}"})


def test_an_async_run_with_a_killed_actor_leaves_no_container(tmp_path):
    run = tmp_path / "async_terminal"
    proc = subprocess.Popen([sys.executable, "-m", "harness.run", "progress=false", "mode=async", "env=terminal",
                             "signal=opd", "hints=next_state", "mode.teacher=policy", "parallel=2",
                             "mode.group_size=2", "mode.batch_samples=4", "mode.eval_limit=1", "mode.iterations=50",
                             "env.max_steps=3", "model.max_new_tokens=16", f"hydra.run.dir={run}"],
                            cwd=ROOT, env=dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path)), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = docker.from_env()
    try:
        deadline = time.monotonic() + 400
        while True:  # the rollout actors' own containers (not the driver's, for the evaluation)
            actors = [c for c in _containers(client, run.name) if c.labels.get("nextstate.pid") != str(proc.pid)]
            if actors or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert actors, f"no rollout actor started a container:\n{proc.stdout.read()[-3000:] if proc.poll() else ''}"
        os.kill(int(actors[0].labels["nextstate.pid"]), signal.SIGKILL)
        time.sleep(5)
        assert proc.poll() is None  # the run goes on without it
        proc.terminate()
        out = proc.communicate(timeout=180)[0]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "resume with" in out, out[-3000:]
    assert _containers(client, run.name) == []
