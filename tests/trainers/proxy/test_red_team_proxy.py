"""Red-team findings against `mode=proxy` (trainers/proxy/), each an attack that must now fail: secrets
written down or printed, requests that stall or crash the proxy, sessions that mix users' messages.
Fast: the proxy's request handling with a scripted policy (no model), and one run of harness.run that
stops before the model loads. The journal's findings are in test_journal.py."""
import os
import socket
import subprocess
import sys

import pytest

from harness.resume import resume_command
from tests.paths import ROOT

SECRET = "sk-red-team-0123456789"


@pytest.mark.red_team
def test_an_api_key_given_on_the_command_line_is_never_written_down_or_printed(tmp_path):
    with socket.socket() as s:  # a taken port: the run stops right after the app's start, before the model
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "harness.run", "mode=proxy", f"mode.port={port}", "signal=opd",
                            "hints=next_state", f"mode.api_key={SECRET}", f"hydra.run.dir={tmp_path / 'run'}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path)))
    assert p.returncode != 0 and "cannot listen" in p.stderr
    written = {f: f.read_text() for f in (tmp_path / "run").rglob("*") if f.is_file()}
    assert {f.name for f in written} >= {"config.yaml", "overrides.yaml", "hydra.yaml"}
    assert [f for f, text in written.items() if SECRET in text] == []
    assert "mode.api_key=***" in written[tmp_path / "run" / ".hydra" / "overrides.yaml"]
    assert SECRET not in p.stdout + p.stderr


@pytest.mark.red_team
def test_the_resume_command_printed_on_ctrl_c_leaves_the_key_out(tmp_path):
    for given in (f"mode.api_key={SECRET}", f"+mode.api_key={SECRET}", "mode.api_key=***"):
        command = resume_command(["mode=proxy", given, "resume=old"], tmp_path)
        assert SECRET not in command and "api_key=" not in command and "NEXTSTATE_PROXY_API_KEY" in command
        assert command.startswith(f"python -m harness.run mode=proxy resume={tmp_path}")
    assert "NEXTSTATE_PROXY_API_KEY" not in resume_command(["mode=proxy"], tmp_path)
