"""Local servers are keyed: a server the harness launches answers nothing but
/health without `Authorization: Bearer <key>`, its key a fresh random one handed over in the
environment (never on the command line, which `ps` shows every user) and never written to the run
dir; HTTPPolicy and the Endpoints a Ray actor rebuilds it from carry the key; attached servers take
`backend.api_key`; the run dir's records mask it."""
import os
import pickle
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from omegaconf import OmegaConf

from agents.serving.backend import KEY_ENV, LAUNCH, BackendConfig, serve_endpoints
from agents.serving.http_policy import Endpoints, HTTPPolicy
from agents.serving.transformers_policy import SamplingConfig
from harness.resume import recorded_config, resume_command, secrets_of
from nextstate.config import ModelConfig, compose, typed
from tests.agents.serving.stub_server import StubServer

SAMPLING = SamplingConfig(4, 1.0, 1.0, 2048)
SECRET = "k3y-" + "x" * 20


def test_the_client_sends_the_key_and_endpoints_carry_it_without_showing_it_with_a_stub_server():
    stub = StubServer(0)
    try:
        policy = HTTPPolicy(stub.url, None, SAMPLING, model_name="stub", model_path="/m", api_key=SECRET)
        policy.generate_from_ids([[1, 2]])
        list(policy.stream_from_ids([1, 2]))
        policy.update_weights_from_disk("/w")
        ends = policy.endpoints()
        assert SECRET not in repr(ends) and SECRET not in repr(policy.sampling)
        again = pickle.loads(pickle.dumps(ends))  # what travels to a Ray actor
        assert again.api_key == SECRET
        rebuilt = HTTPPolicy(again.urls, None, SAMPLING, model_name="stub", api_key=again.api_key)
        rebuilt.generate_from_ids([[3]])
        assert stub.authorizations == [f"Bearer {SECRET}"] * 4
        unkeyed = HTTPPolicy(stub.url, None, SAMPLING, model_name="stub")
        unkeyed.generate_from_ids([[1]])
        assert stub.authorizations[-1] is None and unkeyed.headers == {}
    finally:
        stub.kill()


def test_endpoints_default_to_no_key():
    assert Endpoints(["http://x"], "/m", "m", SAMPLING).api_key == ""


def test_attached_servers_take_backend_api_key_from_the_environment_and_records_mask_it(monkeypatch, tmp_path):
    monkeypatch.setenv("NEXTSTATE_BACKEND_API_KEY", SECRET)
    cfg = compose(["backend.url=http://127.0.0.1:9"])
    backend = typed(cfg.backend, BackendConfig)
    assert backend.api_key == SECRET and SECRET not in repr(backend)
    assert SECRET in secrets_of(cfg)
    recorded = OmegaConf.to_yaml(recorded_config(cfg))
    assert SECRET not in recorded and "api_key: <set>" in recorded
    command = resume_command(["backend.url=http://h:1", f"backend.api_key={SECRET}"], tmp_path)
    assert SECRET not in command and "NEXTSTATE_BACKEND_API_KEY" in command
    monkeypatch.delenv("NEXTSTATE_BACKEND_API_KEY")
    assert typed(compose().backend, BackendConfig).api_key == ""  # default: attached servers take none


def test_attached_servers_are_served_with_their_key_with_a_stub_server():
    stub = StubServer(0)
    try:
        backend = replace(typed(compose().backend, BackendConfig), url=stub.url, api_key=SECRET)
        with serve_endpoints(backend, "/unused", model_name="stub", dtype="float32") as served:
            assert served.urls == [stub.url] and served.api_key == SECRET and SECRET not in repr(served)
    finally:
        stub.kill()


@pytest.mark.red_team
def test_sglang_gets_its_key_inside_the_process_not_on_its_command_line(tmp_path):
    """SGLang takes the key only as `--api-key`: the launch shim reads it from stdin and adds it to
    sys.argv in the process, so neither /proc/<pid>/cmdline (what `ps` shows) nor the environment
    (/proc/<pid>/environ) ever has it. A stand-in `sglang.launch_server` records what it was started with."""
    fake = tmp_path / "sglang"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    out = tmp_path / "seen.txt"
    (fake / "launch_server.py").write_text(
        "import os, sys\n"
        "if __name__ == '__main__':\n"
        f"    cmdline = open('/proc/self/cmdline', 'rb').read().decode()\n"
        f"    open({str(out)!r}, 'w').write(repr((sys.argv[1:], cmdline, os.environ.get({KEY_ENV!r}))))\n")
    cfg = replace(typed(compose(["backend=sglang"]).backend, BackendConfig), python=sys.executable)
    cmd = LAUNCH["sglang"](cfg, "/models/m", 30001, "bfloat16", "m")
    assert not any(SECRET in a for a in cmd)
    subprocess.run(cmd, input=SECRET + "\n", text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)},
                   check=True, timeout=60)
    argv, cmdline, env_after = eval(out.read_text())
    assert argv == ["--model-path", "/models/m", "--host", cfg.host, "--port", "30001", "--dtype", "bfloat16",
                    "--api-key", SECRET]
    assert SECRET not in cmdline and env_after is None


def _raw_post_without_body(url: str, length: int) -> tuple[bytes, float]:
    """A POST that announces `length` bytes and sends none: a server that reads bodies before the key
    check would wait for them."""
    host, port = url.removeprefix("http://").split(":")
    t0 = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n"
                  "Content-Type: application/json\r\n\r\n".encode())
        reply = s.recv(4096)
    return reply, time.monotonic() - t0


@pytest.mark.red_team
@pytest.mark.model
def test_a_launched_server_refuses_requests_without_its_key_and_the_key_is_nowhere_to_be_read(cfg, tmp_path):
    from agents.factory import serve_policy

    model = replace(typed(cfg.model, ModelConfig), max_new_tokens=2)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    backend = replace(typed(cfg.backend, BackendConfig), api_key=SECRET)  # the attached servers' key
    with serve_policy(model, backend, cfg.paths.cache_dir, log_path=run_dir / "server.log") as policy:
        url, key = policy.url, policy.endpoints().api_key
        assert len(key) >= 32 and key != SECRET  # a launched server gets a fresh one
        assert policy.headers == {"Authorization": f"Bearer {key}"}
        assert requests.get(url + "/health", timeout=10).status_code == 200  # the one open route
        body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1}}
        for wrong in ({}, {"Authorization": "Bearer"}, {"Authorization": f"Bearer {key}x"},
                      {"Authorization": key}, {"Authorization": f"bearer {key}"}):
            for route in ("/generate", "/v1/chat/completions", "/update_weights_from_disk"):
                r = requests.post(url + route, json=body, headers=wrong, timeout=10)
                assert r.status_code == 401, (route, wrong, r.text)
            assert requests.get(url + "/get_model_info", headers=wrong, timeout=10).status_code == 401
        reply, took = _raw_post_without_body(url, 10**9)
        assert reply.startswith(b"HTTP/1.1 401") and took < 5  # refused before any body is read
        assert policy.generate([[{"role": "user", "content": "hi"}]])[0].token_ids  # the key opens it
        port = url.rsplit(":", 1)[1]
        pids = subprocess.run(["pgrep", "-f", f"embedded_server.*--port {port}"], capture_output=True,
                              text=True).stdout.split()
        assert pids
        for pid in pids:
            assert key.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
            assert key.encode() not in Path(f"/proc/{pid}/environ").read_bytes()  # what the same user reads
    leaked = [p for p in run_dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert leaked == [] and (run_dir / "server.log").read_text().count("keyed") == 1
