"""Fair generation on the embedded server: one request asking for a huge reply at
temperature 0 does not hold the model while short requests arrive (the batcher preempts it between
decoding steps), its max_new_tokens is clamped to what the model's context leaves, and it ends at the
server's request deadline. The real model behind the real server, over HTTP."""
import threading
import time
from dataclasses import replace

import pytest
import requests

from agents.factory import serve_policy
from agents.serving.backend import BackendConfig
from nextstate.config import ModelConfig, typed

pytestmark = pytest.mark.model
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def served(cfg):
    backend = replace(typed(cfg.backend, BackendConfig), request_deadline_s=DEADLINE_S)
    with serve_policy(typed(cfg.model, ModelConfig), backend, cfg.paths.cache_dir) as policy:
        yield policy


def _post(policy, body: dict, timeout: float = 120) -> requests.Response:
    return requests.post(policy.url + "/generate", json=body, headers=policy.headers, timeout=timeout)


@pytest.mark.slow
@pytest.mark.red_team
@pytest.mark.timeout(300)
def test_a_huge_reply_at_temperature_zero_does_not_hold_short_requests_and_ends_at_the_deadline(served):
    prompt = served.prompt_ids([{"role": "user", "content": "Count from one to a million, in words."}])
    hog: dict = {}

    def huge():
        t0 = time.monotonic()
        hog["reply"] = _post(served, {"input_ids": prompt, "sampling_params": {
            "max_new_tokens": 10**9, "temperature": 0, "ignore_eos": True}})
        hog["took"] = time.monotonic() - t0

    thread = threading.Thread(target=huge)
    thread.start()
    time.sleep(3)  # it is decoding now
    short_took = []
    for word in ("fruit", "colour", "animal"):
        t0 = time.monotonic()
        r = _post(served, {"input_ids": served.prompt_ids([{"role": "user", "content": f"Name a {word}."}]),
                           "sampling_params": {"max_new_tokens": 8, "temperature": 0}}, timeout=60)
        short_took.append(time.monotonic() - t0)
        assert r.status_code == 200 and 0 < r.json()["meta_info"]["completion_tokens"] <= 8
    assert "reply" not in hog  # the huge one was still running while the short ones were served
    assert max(short_took) < 8, short_took  # alone, one takes ~0.5 s; behind a 10^9-token reply, forever
    thread.join(DEADLINE_S + 60)
    out = hog["reply"].json()
    assert hog["reply"].status_code == 200 and out["meta_info"]["finish_reason"]["type"] == "length"
    assert DEADLINE_S - 1 < hog["took"] < DEADLINE_S + 15  # cut at the deadline, not at 10^9 tokens
    assert 0 < out["meta_info"]["completion_tokens"] < 8192  # and never past the model's context


@pytest.mark.red_team
@pytest.mark.timeout(120)
def test_a_prompt_that_fills_the_context_and_bad_sampling_numbers_are_a_400(served):
    info = requests.get(served.url + "/get_model_info", headers=served.headers, timeout=10).json()
    context = info["context_tokens"]
    assert context == 8192  # SmolLM2-135M's
    prompt = served.prompt_ids([{"role": "user", "content": "Say hi."}])
    r = _post(served, {"input_ids": [prompt[-1]] * context, "sampling_params": {"max_new_tokens": 1}})
    assert r.status_code == 400 and "context" in r.json()["error"]["message"]  # refused before any prefill
    for bad in ({"temperature": float("nan")}, {"top_p": 0}, {"max_new_tokens": 1.5}, {"max_new_tokens": -1}):
        r = requests.post(served.url + "/generate", headers={**served.headers, "Content-Type": "application/json"},
                          data=('{"input_ids": [1, 2], "sampling_params": %s}' % str(bad).replace("'", '"')
                                .replace("nan", "NaN")).encode(), timeout=10)
        assert r.status_code == 400 and "sampling_params" in r.json()["error"]["message"], (bad, r.text)


@pytest.mark.red_team
@pytest.mark.timeout(60)
def test_the_embedded_server_refuses_an_oversized_body_before_reading_it(served):
    import socket

    host, port = served.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        auth = served.headers["Authorization"]
        s.sendall(f"POST /generate HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {2 * 10**9}\r\n"
                  "Content-Type: application/json\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 413")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_weight_update_waits_for_the_reply_in_progress_so_no_reply_mixes_two_versions(served):
    prompt = served.prompt_ids([{"role": "user", "content": "Tell me a long story."}])
    long: dict = {}

    def generate():
        r = _post(served, {"input_ids": prompt, "sampling_params": {"max_new_tokens": 10**9, "temperature": 0,
                                                                    "ignore_eos": True}})
        long.update(reply=r.json(), done_at=time.monotonic())

    thread = threading.Thread(target=generate)
    thread.start()
    time.sleep(3)
    before = requests.get(served.url + "/get_model_info", headers=served.headers, timeout=10).json()["weight_version"]
    r = requests.post(served.url + "/update_weights_from_disk", json={"model_path": served.model_path},
                      headers=served.headers, timeout=120)
    updated_at = time.monotonic()
    thread.join(60)
    assert r.status_code == 200 and r.json()["weight_version"] == before + 1
    assert long["reply"]["meta_info"]["weight_version"] == before  # sampled from one version, the old one
    assert long["done_at"] <= updated_at  # the update waited for it (its deadline bounds the wait)
