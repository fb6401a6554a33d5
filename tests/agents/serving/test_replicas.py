"""`backend.replicas=2` with the real model: two embedded servers, one balanced HTTPPolicy over them,
and nothing left running after. One pair for the whole file (each server loads the model)."""
import os
import pickle
import subprocess
from dataclasses import replace
from urllib.parse import urlparse

import pytest
import requests

from agents.factory import serve_policy
from agents.serving.backend import BackendConfig
from agents.serving.transformers_policy import SamplingConfig
from nextstate.config import ModelConfig, typed

pytestmark = pytest.mark.model

SHORT = SamplingConfig(4, 0.0, 1.0, 2048)


def _info(url: str, headers: dict) -> dict:
    return requests.get(url + "/get_model_info", headers=headers, timeout=10).json()


def _server_processes(urls: list[str]) -> bytes:
    """The command lines of embedded servers this test process launched on these ports."""
    found = b""
    for url in urls:
        pattern = f"port {urlparse(url).port} .*parent-pid {os.getpid()}"
        found += subprocess.run(["pgrep", "-af", pattern], capture_output=True).stdout
    return found


@pytest.mark.slow
def test_two_replicas_start_two_embedded_servers_balance_over_them_and_both_stop_after(cfg, tmp_path):
    model = replace(typed(cfg.model, ModelConfig), max_new_tokens=4)
    backend = replace(typed(cfg.backend, BackendConfig), replicas=2)
    with serve_policy(model, backend, cfg.paths.cache_dir, log_path=tmp_path / "policy.log") as policy:
        urls = policy.live_urls
        assert len(urls) == 2 and len(set(urls)) == 2 and _server_processes(urls).count(b"\n") == 2
        assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.0.log", "policy.1.log"]

        msgs = [{"role": "user", "content": "Say hi."}]
        policy.generate([msgs], sampling=SHORT)
        policy.generate([msgs], sampling=SHORT)  # round-robin: one request each
        seen = [_info(u, policy.headers)["prefix_cache"] for u in urls]
        assert all(s["miss_tokens"] > 0 for s in seen), seen

        # a session stays on one server: its repeats are prefix-cache hits there, none on the other
        before = [_info(u, policy.headers)["prefix_cache"]["hit_tokens"] for u in urls]
        convo = [{"role": "user", "content": "Name a colour that the sea often has."}]
        first = policy.generate([convo], sampling=SHORT, session="ep")[0]
        for _ in range(2):
            assert policy.generate([convo], sampling=SHORT, session="ep")[0].token_ids == first.token_ids
        final = list(policy.stream(convo, sampling=SHORT, session="ep"))[-1][1]
        assert final.token_ids == first.token_ids
        gained = [_info(u, policy.headers)["prefix_cache"]["hit_tokens"] - b for u, b in zip(urls, before)]
        assert sorted(g > 0 for g in gained) == [False, True], gained

        pushed = policy.update_weights_from_disk(policy.model_path)  # the served weights again
        assert pushed["success"] and [_info(u, policy.headers)["weight_version"] for u in urls] == [1, 1]

        ends = pickle.loads(pickle.dumps(policy.endpoints()))
        other = ends.connect()  # what a Ray actor does with it
        assert other.live_urls == urls and other.generate([msgs], sampling=SHORT)[0].token_ids
        assert policy.dropped == {}
    assert _server_processes(urls) == b""  # both stopped
    for url in urls:
        with pytest.raises(requests.ConnectionError):
            requests.get(url + "/health", timeout=5)
