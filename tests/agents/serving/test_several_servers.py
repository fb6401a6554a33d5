"""One HTTPPolicy over several serving endpoints: balancing, session affinity, the weight push to
every server, and what happens when a server dies. Stub servers (tests/agents/serving/stub_server.py:
real HTTP, SGLang's JSON shapes, no model) stand in for the endpoints, since these are the client's
rules; tests/agents/serving/test_replicas.py runs two real embedded servers."""
import pickle
import threading
import time
from dataclasses import replace

import pytest

from agents.serving.backend import BackendConfig, attach_urls, serve_endpoints
from agents.serving.http_policy import Endpoints, HTTPPolicy, ServerError
from agents.serving.transformers_policy import SamplingConfig
from nextstate.config import typed
from tests.agents.serving.stub_server import StubServer

SAMPLING = SamplingConfig(4, 1.0, 1.0, 2048)


@pytest.fixture
def stubs():
    made = []

    def make(n: int, **kw) -> list[StubServer]:
        made.extend(StubServer(i, **kw) for i in range(n))
        return made[-n:]

    yield make
    for s in made:
        s.kill()


def _policy(servers, **kw) -> HTTPPolicy:
    return HTTPPolicy([s.url for s in servers], None, SAMPLING, model_name="stub", model_path="/models/stub", **kw)


def _tag(policy: HTTPPolicy, **kw) -> int:
    """Which server answered one generate request."""
    return policy.generate_from_ids([[1, 2, 3]], **kw)[0].token_ids[0]


def _serving_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[serving]")]


def test_sequential_requests_go_round_the_servers_with_stub_servers(stubs):
    servers = stubs(3)
    policy = _policy(servers)
    assert [_tag(policy) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    assert policy.url == servers[0].url and policy.live_urls == [s.url for s in servers]


def test_the_server_with_fewest_requests_in_flight_gets_the_next_with_stub_servers(stubs):
    busy, idle = stubs(2)
    busy.gate.clear()  # the first request is held on the first server
    policy = _policy([busy, idle])
    held = threading.Thread(target=_tag, args=(policy,))
    held.start()
    while busy.generated() < 1:
        time.sleep(0.01)
    assert [_tag(policy) for _ in range(3)] == [1, 1, 1]  # all to the idle one meanwhile
    busy.gate.set()
    held.join(10)
    assert [_tag(policy) for _ in range(2)] == [0, 1]


def test_a_session_sticks_to_its_server_with_stub_servers(stubs):
    servers = stubs(3)
    policy = _policy(servers)
    first = _tag(policy, session="episode-1")
    for _ in range(4):
        _tag(policy)  # others are spread meanwhile
        assert _tag(policy, session="episode-1") == first
    (lps, _), = policy.score_many([([1, 2], [3, 4])], session="episode-1")
    assert lps == [-1.0, -1.0] and servers[first].requests[-1][1]["logprob_start_len"] == [2]
    events = list(policy.stream_from_ids([1, 2], session="episode-1"))
    assert events[-1][1].token_ids == [first]
    assert _tag(policy, session="episode-2") != first  # a new session goes to a less busy one

    servers[first].kill()  # its server dies: the session moves, and stays where it moved
    moved = _tag(policy, session="episode-1")
    assert moved != first and all(_tag(policy, session="episode-1") == moved for _ in range(3))


def test_a_weight_push_reaches_every_server_before_it_returns_with_stub_servers(stubs):
    servers = stubs(3)
    out = _policy(servers).update_weights_from_disk("/run/weights")
    assert out["success"] and [s.weights for s in servers] == [["/run/weights"]] * 3


def test_a_killed_server_is_dropped_reported_once_and_the_request_served_by_another_with_stub_servers(
        stubs, capsys):
    dead, alive = stubs(2)
    policy = _policy([dead, alive])
    dead.kill()
    assert [_tag(policy) for _ in range(3)] == [1, 1, 1]  # the first one retried on the live server
    lines = _serving_lines(capsys.readouterr().err)
    assert len(lines) == 1 and dead.url in lines[0] and "ConnectionError" in lines[0], lines
    assert policy.live_urls == [alive.url] and policy.url == alive.url
    assert list(policy.dropped) == [dead.url] and "ConnectionError" in policy.dropped[dead.url]
    policy.update_weights_from_disk("/w")  # goes to the live one only, without complaint
    assert alive.weights == ["/w"] and policy.endpoints().urls == [alive.url]


def test_a_server_that_does_not_answer_in_time_is_dropped_with_stub_servers(stubs, capsys):
    stuck, = stubs(1, delay_s=2.0)
    fine = StubServer(7)
    try:
        policy = HTTPPolicy([stuck.url, fine.url], None, SAMPLING, model_name="stub", timeout_s=0.5)
        assert _tag(policy) == 7
        assert "Timeout" in policy.dropped[stuck.url] and stuck.url in capsys.readouterr().err
    finally:
        fine.kill()


def test_a_server_dropped_by_a_weight_push_leaves_the_others_updated_with_stub_servers(stubs, capsys):
    a, b, c = stubs(3)
    policy = _policy([a, b, c])
    b.kill()
    policy.update_weights_from_disk("/w1")
    assert a.weights == c.weights == ["/w1"] and policy.live_urls == [a.url, c.url]
    assert len(_serving_lines(capsys.readouterr().err)) == 1


def test_with_every_server_dead_the_error_names_each_and_why_with_stub_servers(stubs, capsys):
    servers = stubs(2)
    policy = _policy(servers)
    for s in servers:
        s.kill()
    for call in (lambda: _tag(policy), lambda: policy.update_weights_from_disk("/w"),
                 lambda: list(policy.stream_from_ids([1]))):
        with pytest.raises(ServerError, match="no serving endpoint left") as e:
            call()
        assert all(s.url in str(e.value) for s in servers) and "ConnectionError" in str(e.value)
    assert len(_serving_lines(capsys.readouterr().err)) == 2  # each reported once
    assert policy.url == servers[0].url  # still something to print


def test_an_http_4xx_is_the_callers_error_and_keeps_the_server_with_stub_servers(stubs, capsys):
    servers = stubs(2)
    policy = _policy(servers)
    with pytest.raises(ServerError, match="HTTP 400.*non-negative"):
        policy.generate_from_ids([[-1]])
    with pytest.raises(ServerError, match="HTTP 400"):
        list(policy.stream_from_ids([-1]))
    assert policy.dropped == {} and policy.live_urls == [s.url for s in servers]
    assert _serving_lines(capsys.readouterr().err) == []
    assert {_tag(policy) for _ in range(2)} == {0, 1}


def test_a_stream_moves_to_another_server_when_its_first_is_gone_with_stub_servers(stubs):
    dead, alive = stubs(2)
    dead.kill()
    policy = _policy([dead, alive])
    text, gen = list(policy.stream_from_ids([5, 6]))[-1]
    assert (text, gen.token_ids, gen.prompt_token_ids) == ("s1", [1], [5, 6])
    assert list(policy.dropped) == [dead.url]


def test_one_url_still_makes_a_policy_and_endpoints_travel_as_plain_values_with_stub_servers(stubs):
    server, = stubs(1)
    policy = HTTPPolicy(server.url + "/", None, SAMPLING, model_name="stub")
    assert policy.url == server.url and _tag(policy) == 0
    with pytest.raises(ValueError, match="model_path"):
        policy.endpoints()  # a policy made without model_path cannot be rebuilt elsewhere
    ends = _policy([server, server]).endpoints()
    assert ends == Endpoints([server.url], "/models/stub", "stub", SAMPLING)  # one url given twice: once
    assert pickle.loads(pickle.dumps(ends)) == ends


def test_the_backend_config_attaches_to_every_server_it_names_with_stub_servers(stubs, cfg):
    a, b = stubs(2)
    backend = replace(typed(cfg.backend, BackendConfig), url=a.url, servers=[b.url, a.url + "/"])
    assert attach_urls(backend) == [a.url, b.url]
    with serve_endpoints(backend, "/models/unused", model_name="stub", dtype="float32") as served:
        assert served.urls == [a.url, b.url]
    assert _tag(_policy([a, b])) == 0  # attached servers are left running


def test_the_default_backend_config_launches_one_server(cfg):
    backend = typed(cfg.backend, BackendConfig)
    assert (backend.replicas, backend.servers, attach_urls(backend)) == (1, [], [])
