"""Live sessions as steps (trainers/proxy/sessions.py) and the proxy's request handling (trainers/proxy/server.py):
the next main message is the previous reply's next state; side turns and finished sessions do not
train; bad requests get a 400 saying why and a weight swap a 503; with the real model, a proxy run
serves OpenAI-style clients, trains on their sessions and stops after its updates."""
import contextlib
import functools
import json
import os
import subprocess
import sys
import time

import openai
import pytest
import requests

from agents.serving.transformers_policy import SamplingConfig
from nextstate.types import Generation
from tests.paths import ROOT
from trainers.gate import Gate
from trainers.proxy.openai_wire import BadRequest, plain_messages
from trainers.proxy.server import Proxy
from trainers.proxy.sessions import SessionBook, next_state_of

U = lambda text: {"role": "user", "content": text}  # noqa: E731
A = lambda text: {"role": "assistant", "content": text}  # noqa: E731
FRUIT_TOOL = {"type": "function", "function": {"name": "pick_fruit", "description": "Pick a fruit",
                                               "parameters": {"type": "object", "properties": {}}}}


def gen(text, ids=(5, 6)):
    return Generation(text=text, token_ids=list(ids), logprobs=[-0.5] * len(ids), prompt_token_ids=[1, 2, 3])


def test_the_next_main_message_is_the_next_state_of_the_previous_reply():
    book = SessionBook()
    assert book.record("s1", "main", [U("2+2?")], gen("5"), version=3) == []
    done = book.record("s1", "main", [U("2+2?"), A("5"), U("No, it is 4.")], gen("4"), version=4)
    (version, step), = done
    assert version == 3  # the version the reply was sampled with
    assert step.index == 0 and step.action_text == "5" and step.prompt_messages == [U("2+2?")]
    assert step.next_state.kind == "user" and step.next_state.text == "No, it is 4."
    assert step.action_token_ids == [5, 6] and step.rollout_logprobs == [-0.5, -0.5]
    assert step.prompt_token_ids == [1, 2, 3]
    (_, step2), = book.record("s1", "main", [U("2+2?"), A("5"), U("No, it is 4."), A("4"), U("thanks")], gen("ok"), 4)
    assert step2.index == 1 and step2.next_state.text == "thanks"


def test_side_turns_anonymous_requests_and_finished_sessions_do_not_train():
    book = SessionBook()
    book.record("s", "main", [U("q")], gen("a"), 0)
    assert book.record("s", "side", [U("title this chat")], gen("Title"), 0) == []  # served, not recorded
    assert book.record(None, "main", [U("q")], gen("a"), 0) == []  # no session id: nothing to follow up
    (_, step), = book.record("s", "main", [U("q"), A("a"), U("more detail please")], gen("b"), 0, done=True)
    assert step.action_text == "a"  # the side turn did not replace the pending reply
    assert book.open_sessions == 0 and book.unanswered == 1  # "b" never gets a next state
    assert book.record("s", "main", [U("new start")], gen("c"), 0) == []  # a new session under the same id
    with pytest.raises(BadRequest, match="main or side"):
        book.record("s", "aside", [U("q")], gen("a"), 0)


def test_a_client_without_headers_is_trained_on_each_conversation_it_holds():
    """A stock OpenAI client (OpenClaw, an SDK) sends no X-Session-Id: each request is matched to the
    conversation whose waiting reply its history carries; two conversations interleaved stay apart."""
    from tests.trainers.proxy.test_openai_wire import ScriptedPolicy, words

    proxy = Proxy(ScriptedPolicy("4", "Paris", "yes, 4", "the capital"), Gate(0), SessionBook(),
                  SamplingConfig(16, 1.0, 1.0, 512), "scripted", prompt_tokens=words)
    chat = lambda msgs: proxy.chat({"messages": msgs}, {})  # noqa: E731
    assert chat([U("2+2?")])[0] == chat([U("capital of France?")])[0] == 200
    assert chat([U("2+2?"), A("4"), U("sure?")])[0] == 200
    assert chat([U("capital of France?"), A("Paris"), U("and of Italy?")])[0] == 200
    steps = [proxy.book.steps.get_nowait() for _ in range(2)]
    assert [(s.step.action_text, s.step.next_state.text) for s in steps] == [("4", "sure?"), ("Paris", "and of Italy?")]
    assert steps[0].session != steps[1].session and proxy.book.open_sessions == 2


def test_a_message_the_client_inserted_for_one_turn_may_be_missing_from_the_next():
    """OpenClaw adds a context block after the user's message and leaves it out of the history it
    replays: the reply still pairs. A tool call echoed back re-encoded (no id, other JSON spacing) too."""
    book = SessionBook()
    call = '<tool_call>\n{"name": "pick_fruit", "arguments": {"kind": "red"}}\n</tool_call>'
    book.record("s", "main", [U("pick one"), U("[context: today is Monday]")], gen(call), 0)
    echoed = A('<tool_call>{"name":"pick_fruit","arguments":{"kind":"red"}}</tool_call>')
    (_, step), = book.record("s", "main", [U("pick one"), echoed, {"role": "tool", "content": "apple"}],
                             gen("An apple."), 0)
    assert step.action_text == call and step.next_state.kind == "tool" and step.next_state.text == "apple"
    assert book.record("s", "main", [U("pick one"), echoed, {"role": "tool", "content": "apple"},
                                     A("A pear."), U("why?")], gen("x"), 0) == []  # a rewritten reply: not paired
    assert book.unanswered == 1


def test_tool_results_are_a_tool_next_state_and_old_sessions_are_forgotten():
    msgs = [U("weather?"), A('<tool_call>{"name": "w"}</tool_call>'), {"role": "tool", "content": "sunny"}]
    ns = next_state_of(msgs)
    assert ns.kind == "tool" and ns.text == "sunny"
    assert next_state_of([U("only a question")]).text == "only a question"
    book = SessionBook(max_sessions=2)
    for s in ("a", "b", "c"):
        book.record(s, "main", [U("q")], gen("x"), 0)
    assert book.open_sessions == 2 and book.unanswered == 1
    assert book.record("a", "main", [U("q"), A("x"), U("follow-up")], gen("y"), 0) == []  # "a" was dropped


def test_messages_are_read_as_openai_sends_them_or_refused_with_a_reason():
    assert plain_messages([{"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "image_url"},
                                                        {"type": "text", "text": "there"}]}]) == [U("hi there")]
    assert plain_messages([{"role": "assistant", "content": None}]) == [A("")]
    for bad, why in (([], "non-empty"), ("hi", "must be a list"), ([{"content": "x"}], "role"),
                     ([{"role": "user", "content": 3}], "string")):
        with pytest.raises(BadRequest, match=why):
            plain_messages(bad)


def test_proxy_refuses_bad_requests_and_answers_503_while_weights_are_swapped():
    gate = Gate(0)
    proxy = Proxy(policy=None, gate=gate, book=SessionBook(), sampling=None, model_name="m")  # never reaches the model
    assert proxy.chat([1], {})[0] == 400
    assert proxy.chat({"messages": [U("q")], "n": 3}, {})[0] == 400
    status, body, _ = proxy.chat({"messages": []}, {})
    assert status == 400 and "non-empty" in body["error"]["message"]
    gate.pause()
    status, body, headers = proxy.chat({"messages": [U("q")]}, {"X-Session-Id": "s"})
    assert status == 503 and headers == {"Retry-After": "1"} and "updated" in body["error"]["message"]
    assert proxy.served == 0


@contextlib.contextmanager
def _running_proxy(tmp_path, *extra, env: dict | None = None):
    """A proxy run in `tmp_path / "proxy"` (one update of 2 samples, `env` added to its environment),
    and its URL once it serves; killed on the way out if still running."""
    run_dir = tmp_path / "proxy"
    args = [sys.executable, "-m", "harness.run", "mode=proxy", "signal=opd", "hints=next_state", "mode.teacher=policy",
            "mode.port=0", "mode.batch_samples=2", "mode.iterations=1", "model.max_new_tokens=8", "progress=false",
            f"hydra.run.dir={run_dir}", *extra]
    proc = subprocess.Popen(args, cwd=ROOT, env=dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path), **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600  # a loaded 2-core machine has taken 5 minutes to start Ray and the proxy
        while not (run_dir / "proxy.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()  # first: reading a live process's output would wait for it to end
                raise AssertionError(f"the proxy did not start: {proc.stdout.read()[-3000:]}")
            time.sleep(0.5)
        served = json.loads((run_dir / "proxy.json").read_text())
        assert served["pid"] == proc.pid  # the process to signal, not the Ray actor that serves
        yield proc, served["url"]
    finally:
        if proc.poll() is None:
            proc.kill()


def _chat(url, msgs, session, **headers):
    r = requests.post(f"{url}/chat/completions", json={"messages": msgs, "temperature": 1.0},
                      headers={"X-Session-Id": session, **headers}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


@pytest.mark.model
@pytest.mark.timeout(900)
@pytest.mark.slow  # ~1 min: a proxy run that trains an update
def test_proxy_serves_openai_clients_and_trains_on_their_sessions(tmp_path):
    run_dir = tmp_path / "proxy"
    with _running_proxy(tmp_path) as (proc, url):
        chat = functools.partial(_chat, url)
        assert requests.get(f"{url}/models", timeout=10).json()["data"][0]["id"] == "smollm2-135m-instruct"
        a1 = chat([U("What is 2+2?")], "alice")
        chat([U("Give this chat a short title.")], "alice", **{"X-Turn-Type": "side"})
        chat([U("What is 2+2?"), A(a1), U("No, answer with just the number 4, please.")], "alice")
        # bob's agent uses the official client, offers a tool and streams: whatever the model does
        # (call the tool or answer), its message goes back into the history as the client got it
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
        bob = {"X-Session-Id": "bob"}
        raw = client.chat.completions.with_raw_response.create(
            model="smollm2-135m-instruct", messages=[U("Name a fruit.")], tools=[FRUIT_TOOL], temperature=1.0,
            extra_headers=bob)
        first, token = raw.parse().choices[0], raw.headers["X-Session-Token"]  # ending the session needs the token
        assert first.finish_reason in ("stop", "length", "tool_calls")
        assert (first.message.tool_calls is not None) == (first.finish_reason == "tool_calls")
        history = [U("Name a fruit."), first.message.model_dump(exclude_none=True),
                   U("Please answer in one word: apple.")]
        chunks = list(client.chat.completions.create(model="smollm2-135m-instruct", messages=history, stream=True,
                                                     seed=11, extra_headers={**bob, "X-Session-Done": "1",
                                                                                "X-Session-Token": token}))
        assert chunks[-1].choices[0].finish_reason in ("stop", "length")
        # streamed token by token, it is the reply the same seed gives whole (asked as a side turn)
        whole = client.chat.completions.create(model="smollm2-135m-instruct", messages=history, seed=11,
                                               extra_headers={**bob, "X-Turn-Type": "side"})
        streamed = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert "".join(streamed) == whole.choices[0].message.content
        assert len(streamed) >= min(2, whole.usage.completion_tokens)  # in pieces, not whole at the end
        out, _ = proc.communicate(timeout=600)  # two steps = one batch = one update, then it stops
    assert proc.returncode == 0, out[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["mode"] == "proxy" and metrics["iterations"] == 1 and metrics["train_samples"] == 2
    assert metrics["served"] == 6 and metrics["steps_recorded"] == 2 and metrics["unanswered"] == 1
    assert metrics["hints_accepted"] == 2
    log, = metrics["train_log"]
    assert log["version"] == 1 and log["samples"] == 2 and log["staleness_max"] == 0
    assert (run_dir / "weights" / "model.safetensors").exists() and (run_dir / "train_curves.png").exists()


@pytest.mark.model
@pytest.mark.timeout(900)
@pytest.mark.slow  # ~1.5 min: two proxy runs
def test_a_killed_proxy_resumes_with_its_waiting_replies_and_untrained_steps(tmp_path):
    from nextstate.atomic import read_jsonl

    run_dir = tmp_path / "proxy"
    with _running_proxy(tmp_path) as (proc, url):
        a1 = _chat(url, [U("What is 2+2?")], "alice")
        b1 = _chat(url, [U("Name a fruit.")], "bob")
        _chat(url, [U("Name a fruit."), A(b1), U("One word, please: apple.")], "bob")  # bob's step: half a batch
        proc.terminate()
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out[-3000:]
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "proxy.json").exists()  # no stale URL

    with _running_proxy(tmp_path, f"resume={run_dir}") as (proc, url):
        # alice answers the reply she got before the restart: with bob's step, a batch
        _chat(url, [U("What is 2+2?"), A(a1), U("No: it is 4.")], "alice")
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert "resumed 2 replies waiting for their next state and 1 steps not yet trained on" in out
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["iterations"] == 1 and metrics["train_samples"] == 2 and metrics["hints_accepted"] == 2
    # trained through both steps: the journal keeps only the replies still waiting (bob's and alice's new one)
    journal = read_jsonl(run_dir / "sessions.jsonl")
    assert sorted(r["pending"] for r in journal) == ["alice", "bob"] and all("step" not in r for r in journal)


@pytest.mark.slow
def test_a_taken_port_is_a_clear_error_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "harness.run", "mode=proxy", f"mode.port={port}", "signal=opd",
                            "hints=next_state", f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env=dict(os.environ, NEXTSTATE_RESULTS=str(tmp_path),
                                                            NEXTSTATE_PROXY_API_KEY="top-secret-key"))
    assert p.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in p.stderr and "mode.port=0" in p.stderr
    assert not (tmp_path / "run" / "server.log").exists()  # no model server was started
    recorded = (tmp_path / "run" / "config.yaml").read_text()
    assert "api_key: <set>" in recorded and "top-secret-key" not in recorded  # the key is not written down


def test_a_journal_brings_back_waiting_replies_and_untrained_steps(tmp_path):
    from trainers.proxy.journal import SessionJournal

    path = tmp_path / "sessions.jsonl"
    tools = [{"type": "function", "function": {"name": "w"}}]
    book = SessionBook(max_sessions=2, journal=SessionJournal(path))
    book.record("a", "main", [U("q1")], gen("a1"), 0, tools=tools)
    book.record("b", "main", [U("q2")], gen("b1"), 0)
    book.record("b", "main", [U("q2"), A("b1"), U("no")], gen("b2"), 1)  # step 0
    book.record("c", "main", [U("q3")], gen("c1"), 1)
    book.record("c", "main", [U("q3"), A("c1"), U("ok")], gen("c2"), 1, done=True)  # step 1; c is over
    book.record("d", "main", [U("q4")], gen("d1"), 1)  # "a" was forgotten when "c" came, "b" now
    book.record("e", "main", [U("q5")], gen("e1"), 1)
    assert [book.steps.get_nowait().no for _ in range(2)] == [0, 1]

    # the proxy dies; step 0 was trained on, step 1 was not
    again = SessionBook(max_sessions=2, journal=SessionJournal(path), first_step=1)
    assert (again.restored_pending, again.restored_steps) == (2, 1)
    s = again.steps.get_nowait()
    assert (s.no, s.session, s.version, s.step.action_text, s.step.next_state.text) == (1, "c", 1, "c1", "ok")
    (version, step), = again.record("d", "main", [U("q4"), A("d1"), U("thanks")], gen("d2"), 2)
    assert (version, step.index, step.action_text, step.next_state.text) == (1, 0, "d1", "thanks")
    assert step.action_token_ids == [5, 6] and step.prompt_token_ids == [1, 2, 3]
    assert again.steps.get_nowait().no == 2  # numbering goes on
    assert again.record("b", "main", [U("q2"), A("b1"), U("no"), A("b2"), U("late")], gen("x"), 2) == []  # forgotten

    # after an update that trained through step 2, only what is open is kept
    again.compact(keep_from=3)
    third = SessionBook(max_sessions=2, journal=SessionJournal(path), first_step=3)
    assert third.restored_steps == 0 and list(third._pending) == ["d", "b"] and third.next_no == 3
    with open(path, "a") as f:
        f.write('{"pending": "z", "index": 0, "mess')  # a line cut off by the kill
    assert SessionBook(journal=SessionJournal(path), first_step=3).restored_pending == 2


def test_tools_of_a_waiting_reply_survive_a_restart(tmp_path):
    from trainers.proxy.journal import SessionJournal

    tools = [{"type": "function", "function": {"name": "w"}}]
    SessionBook(journal=SessionJournal(tmp_path / "j.jsonl")).record("a", "main", [U("q")], gen("a1"), 0, tools=tools)
    restored = SessionBook(journal=SessionJournal(tmp_path / "j.jsonl"))
    assert restored.tools == {"a": tools}
    restored.record("a", "main", [U("q"), A("a1"), U("wrong")], gen("a2"), 0)
    assert restored.steps.get_nowait().tools == tools  # the teacher's prompt will offer the same tools
