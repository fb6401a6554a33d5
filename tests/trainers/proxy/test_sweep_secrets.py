"""A key given to a sweep (`-m ... mode.api_key=<key>`) is not left in clear in the sweep's record:
Hydra writes `<sweep dir>/multirun.yaml` (the config and the overrides) before any job runs, and each
job masks it as it masks its own `.hydra/` record (harness/resume.py: redact_secrets)."""
import os
import socket
import subprocess
import sys

import pytest

from tests.paths import ROOT

SECRET = "sk-sweep-red-team-0123456789"


@pytest.mark.slow
@pytest.mark.red_team
def test_a_sweeps_multirun_yaml_does_not_keep_the_key_in_clear(tmp_path):
    with socket.socket() as s:  # a taken port: each job stops right after the app's start, before the model
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "harness.run", "-m", "mode=proxy", f"mode.port={port}",
                            "signal=opd", "hints=next_state", f"mode.api_key={SECRET}", "seed=1",
                            f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path)))
    assert "cannot listen" in p.stderr, p.stderr[-2000:]
    record = (tmp_path / "sweep" / "multirun.yaml").read_text()
    assert SECRET not in record and "mode.api_key=***" in record
    written = {f: f.read_text() for f in (tmp_path / "sweep").rglob("*") if f.is_file()}
    assert any(f.name == "overrides.yaml" for f in written)  # the job's own record is there too
    assert [f for f, text in written.items() if SECRET in text] == []


@pytest.mark.slow
@pytest.mark.red_team
def test_a_submitit_sweep_takes_the_key_from_the_environment_never_the_command(tmp_path):
    """submitit pickles each job's overrides into `.submitit/<job>/*_submitted.pkl` before the job runs
    (seen: the key in clear there). A key on the command line of such a sweep is refused before Hydra
    starts; given in the environment, it is in no file of the sweep."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "harness.run", "-m", "hydra/launcher=submitit_local", "mode=proxy",
               f"mode.port={port}", "signal=opd", "hints=next_state", "seed=1", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
        env = dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path))
        refused = subprocess.run([*cmd, f"mode.api_key={SECRET}"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=60, env=env)
        assert refused.returncode == 1 and "NEXTSTATE_PROXY_API_KEY" in refused.stderr, refused.stderr[-2000:]
        assert SECRET not in refused.stderr and not (tmp_path / "sweep").exists()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=dict(env, NEXTSTATE_PROXY_API_KEY=SECRET))
    assert "cannot listen" in p.stderr, p.stderr[-2000:]  # the job ran, with the key, and stopped at the port
    written = [f for f in (tmp_path / "sweep").rglob("*") if f.is_file()]
    assert any(f.name.endswith("_submitted.pkl") for f in written)
    assert [f for f in written if SECRET.encode() in f.read_bytes()] == []
