"""The proxy speaks OpenAI's wire format (trainers/proxy/openai_wire.py): an agent framework's tool calls
come back as `tool_calls` it can run, its history reads back as the `<tool_call>` text the policy
wrote, and streaming clients get server-sent events. Checked with the official `openai` client
against the proxy's real HTTP handler; the policy behind it is scripted, since the 135M model
cannot be made to emit a chosen call (the real-model proxy run is in tests/trainers/proxy/test_sessions.py)."""
import json

import openai
import pytest

from agents.serving.transformers_policy import SamplingConfig
from envs.toolcall.parse import scan_calls
from nextstate.types import Generation
from trainers.gate import Gate
from trainers.proxy.http import serve
from trainers.proxy.openai_wire import BadRequest, EventStream, completion, plain_messages, shown_so_far
from trainers.proxy.server import Proxy
from trainers.proxy.sessions import SessionBook

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
TWO_CALLS = ('Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>')


def gen(text: str, finish_reason: str = "stop") -> Generation:
    return Generation(text=text, token_ids=[7, 8, 9], logprobs=[-0.1] * 3, prompt_token_ids=[1, 2],
                      finish_reason=finish_reason)


def words(messages, tools):
    """A prompt's length for a scripted proxy: one token a word (the real proxy counts the model's tokens)."""
    return sum(len(m["content"].split()) for m in messages) + (len(json.dumps(tools).split()) if tools else 0)


class ScriptedPolicy:
    """Answers with the given replies in order and keeps what it was asked (for the proxy's wire format)."""

    def __init__(self, *replies: str):
        self.replies, self.asked = list(replies), []

    def generate(self, conversations, *, tools=None, sampling=None, seeds=None, session=None):
        self.asked.append((conversations[0], tools))
        self.sampling, self.seeds, self.session = sampling, seeds, session
        return [gen(self.replies.pop(0))]

    def stream(self, messages, *, tools=None, sampling=None, seed=None, session=None):
        """The reply a character at a time, as the policy server streams its tokens."""
        (whole,) = self.generate([messages], tools=tools, sampling=sampling, seeds=None if seed is None else [seed],
                                 session=session)
        for i in range(1, len(whole.text) + 1):
            yield whole.text[:i], None
        yield whole.text, whole


def test_a_reply_with_calls_becomes_tool_calls_only_when_the_client_offered_tools():
    out = completion(gen(TWO_CALLS), "m", parse_tool_calls=True)
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["content"] == "Let me look."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather", "get_weather"]
    arguments = [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]]
    assert arguments == [{"city": "Paris"}, {"city": "Zürich"}]
    assert len({c["id"] for c in message["tool_calls"]}) == 2 and out["usage"]["total_tokens"] == 5
    # no tools offered (or tool_choice=none): the text as written
    plain = completion(gen(TWO_CALLS), "m", parse_tool_calls=False)["choices"][0]
    assert plain["message"] == {"role": "assistant", "content": TWO_CALLS} and plain["finish_reason"] == "stop"
    # a block that does not parse stays text, so the user can answer it
    broken = '<tool_call>{"name": "get_weather", "arguments": {city: Paris}}</tool_call>'
    bad = completion(gen(broken, "length"), "m", parse_tool_calls=True)["choices"][0]
    assert bad["message"]["content"] == broken and "tool_calls" not in bad["message"]
    assert bad["finish_reason"] == "length"
    only_calls = completion(gen('<tool_call>{"name": "f", "arguments": {}}</tool_call>'), "m", parse_tool_calls=True)
    assert only_calls["choices"][0]["message"]["content"] is None


def test_the_history_reads_back_as_the_calls_the_policy_wrote():
    calls = completion(gen(TWO_CALLS), "m", parse_tool_calls=True)["choices"][0]["message"]
    history = plain_messages([{"role": "user", "content": "Weather in Paris and Zürich?"}, calls,
                              {"role": "tool", "tool_call_id": calls["tool_calls"][0]["id"], "content": "sunny"}])
    assert history[1]["role"] == "assistant" and history[2] == {"role": "tool", "content": "sunny"}
    assert scan_calls(history[1]["content"]) == scan_calls(TWO_CALLS)  # same calls, same text around them
    no_text = plain_messages([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}]}])
    assert scan_calls(no_text[0]["content"]) == ([("f", {})], "", None)
    for bad, why in (([{"role": "assistant", "tool_calls": [{"function": {}}]}],
                      r"tool_calls\[0\]\.function\.name is required"),
                     ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}],
                      "not JSON"),
                     ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}],
                      "JSON object"),
                     ([{"role": "assistant", "tool_calls": "f()"}], "must be a list")):
        with pytest.raises(BadRequest, match=why):
            plain_messages(bad)


def test_a_stream_shows_text_only_once_it_cannot_turn_into_a_stop_string_or_a_call():
    assert shown_so_far("Thought: x\nObs", ("Observation:",), False) == "Thought: x\n"  # may become the stop
    assert shown_so_far("Thought: x\nObservation: y", ("Observation:",), False) == "Thought: x\n"
    assert shown_so_far("Thought: x\nObject", ("Observation:",), False) == "Thought: x\nObject"
    assert shown_so_far("Let me look.\n<tool_", (), True) == "Let me look.\n"
    assert shown_so_far('Let me look.\n<tool_call>{"name"', (), True) == "Let me look.\n"
    assert shown_so_far("<tool_call> is a tag", (), False) == "<tool_call> is a tag"  # no tools offered
    assert shown_so_far("caf\ufffd", (), False) == "caf"  # half a character waits for the rest


def test_a_completion_closes_its_stream_with_the_rest_its_calls_and_its_finish():
    done = completion(gen(TWO_CALLS), "m", parse_tool_calls=True)
    stream = EventStream("m")
    raw = (stream.start() + b"".join(stream.closing(done, include_usage=True))).decode()
    events = [e[len("data: "):] for e in raw.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["id"] for c in chunks} == {stream.head["id"]}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == "Let me look."
    assert [d["tool_calls"][0]["index"] for d in deltas if "tool_calls" in d] == [0, 1]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert chunks[-1]["usage"] == done["usage"] and chunks[-1]["choices"] == []
    assert "usage" not in b"".join(stream.closing(done)).decode()
    rest = [json.loads(e[len("data: "):]) for e in b"".join(stream.closing(done, "Let me")).decode().split("\n\n")[:1]]
    assert rest[0]["choices"][0]["delta"] == {"content": " look."}  # after streamed text, only the rest


@pytest.fixture
def served():
    """The proxy's real HTTP server on a free port, with a scripted policy behind it."""
    servers = []

    def start(policy, api_key=""):
        proxy = Proxy(policy, Gate(0), SessionBook(), SamplingConfig(16, 1.0, 1.0, 512), model_name="scripted",
                      api_key=api_key, prompt_tokens=words)
        server = serve(proxy, "127.0.0.1", 0)
        servers.append(server)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused",
                               max_retries=0, timeout=30)
        return proxy, client

    yield start
    for s in servers:
        s.close()


def test_the_openai_client_runs_tool_calls_through_the_proxy_of_a_scripted_policy(served):
    policy = ScriptedPolicy(TWO_CALLS, "Paris is sunny and Zürich is rainy.")
    proxy, client = served(policy)
    session = {"X-Session-Id": "agent-1"}
    messages = [{"role": "user", "content": "Weather in Paris and Zürich?"}]
    first = client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER], extra_headers=session)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me look."
    calls = choice.message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Zürich"})]
    assert policy.asked[0][1] == [WEATHER]  # the tools reached the chat template
    # streamed, the same reply shows its text as it comes and its calls whole at the end
    policy.replies.insert(0, TWO_CALLS)
    events = list(client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER], stream=True,
                                                 extra_headers={"X-Turn-Type": "side"}))
    texts = [c.choices[0].delta.content for c in events if c.choices and c.choices[0].delta.content]
    assert "".join(texts) == "Let me look.\n" and len(texts) > 5
    streamed_calls = [c.choices[0].delta.tool_calls[0] for c in events if c.choices and c.choices[0].delta.tool_calls]
    assert [(c.index, c.function.name, json.loads(c.function.arguments)) for c in streamed_calls] == [
        (0, "get_weather", {"city": "Paris"}), (1, "get_weather", {"city": "Zürich"})]
    assert events[-1].choices[0].finish_reason == "tool_calls"
    policy.asked.pop()
    # the framework runs the calls and sends the results back, as agent loops do
    messages += [choice.message.model_dump(exclude_none=True),
                 *({"role": "tool", "tool_call_id": c.id, "content": r} for c, r in zip(calls, ("sunny", "rainy")))]
    stream = client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER], stream=True,
                                            stream_options={"include_usage": True}, extra_headers=session)
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "Paris is sunny and Zürich is rainy." and len(pieces) > 10  # as it is sampled
    assert chunks[-1].usage.total_tokens == 5
    # the policy read its own calls back as it wrote them, and the first reply is now a step to learn from
    prompt = policy.asked[1][0]
    assert scan_calls(prompt[1]["content"]) == scan_calls(TWO_CALLS)
    done = proxy.book.steps.get_nowait()
    assert (done.no, done.version, done.session, done.step.action_text) == (0, 0, "agent-1", TWO_CALLS)
    assert done.step.next_state.kind == "tool" and done.step.next_state.text == "sunny\nrainy"
    assert proxy.book.tools["agent-1"] == [WEATHER] and done.tools == [WEATHER]


def test_the_openai_client_reads_the_proxys_refusals(served):
    proxy, client = served(ScriptedPolicy())
    with pytest.raises(openai.BadRequestError, match="n must be 1"):
        client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}], n=2)
    with pytest.raises(openai.BadRequestError, match="function.arguments is not JSON"):
        client.chat.completions.create(model="scripted", messages=[
            {"role": "assistant",
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{"}}]}])
    proxy.gate.pause()
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}], stream=True)
    assert e.value.status_code == 503 and e.value.response.headers["Retry-After"] == "1"
    assert proxy.served == 0


def test_parameters_the_proxy_cannot_honour_are_refused_not_ignored(served):
    """A client asking for JSON mode, a forced call or logprobs learns it will not get them; the same
    parameters at their defaults, and ones that do not change the reply, pass."""
    proxy, client = served(ScriptedPolicy("ok"))
    q = [{"role": "user", "content": "q"}]
    for refused, says in (({"response_format": {"type": "json_object"}}, "response_format"),
                          ({"tool_choice": "required", "tools": [WEATHER]}, "cannot force a call"),
                          ({"logprobs": True}, "logprobs"), ({"presence_penalty": 0.5}, "presence_penalty"),
                          ({"logit_bias": {"42": 5}}, "logit_bias")):
        with pytest.raises(openai.BadRequestError, match=says):
            client.chat.completions.create(model="scripted", messages=q, **refused)
    client.chat.completions.create(model="scripted", messages=q, presence_penalty=0, tool_choice="auto",
                                   response_format={"type": "text"}, logprobs=False, user="u1",
                                   extra_body={"temperature": None, "top_p": None})  # nulls mean defaults
    assert proxy.served == 1 and proxy.policy.sampling.temperature == proxy.sampling.temperature


def test_with_an_api_key_set_only_clients_that_send_it_are_served(served):
    proxy, client = served(ScriptedPolicy("hello"), api_key="s3cret")
    with pytest.raises(openai.AuthenticationError, match="API key"):
        client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}])
    with pytest.raises(openai.AuthenticationError):
        client.models.list()
    keyed = client.with_options(api_key="s3cret")
    answer = keyed.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}])
    assert answer.choices[0].message.content == "hello"
    assert [m.id for m in keyed.models.list()] == ["scripted"]
    assert proxy.served == 1


def test_stop_strings_reach_the_policy_and_end_the_text_the_client_reads(served):
    policy = ScriptedPolicy("Thought: look it up\nObservation: sunny\nmore", "fine")
    proxy, client = served(policy)
    out = client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}],
                                         stop=["Observation:", "\n\n"], seed=7, extra_headers={"X-Session-Id": "s"})
    assert out.choices[0].message.content == "Thought: look it up\n"
    assert policy.sampling.stop == ("Observation:", "\n\n") and policy.seeds == [7]
    assert policy.session == "s"  # a session's turns go to one policy server (its prefix cache)
    client.chat.completions.create(model="scripted", stop="\n", extra_headers={"X-Session-Id": "s"}, messages=[
        {"role": "user", "content": "q"}, {"role": "assistant", "content": out.choices[0].message.content},
        {"role": "user", "content": "and?"}])
    assert policy.sampling.stop == ("\n",) and policy.seeds is None
    # the step keeps the whole sampled text: its tokens are what the policy said
    assert proxy.book.steps.get_nowait().step.action_text.endswith("more")
    for bad, why in (({"stop": [""]}, r"stop\[0\] must be a non-empty string"), ({"stop": 3}, "stop must be"),
                     ({"seed": "x"}, "seed must be")):
        with pytest.raises(openai.BadRequestError, match=why):
            client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}], **bad)


def test_a_client_that_leaves_mid_stream_is_not_recorded_and_the_proxy_goes_on(served):
    import time

    import requests

    class Slow(ScriptedPolicy):
        def stream(self, messages, *, tools=None, sampling=None, seed=None, session=None):
            for item in super().stream(messages, tools=tools, sampling=sampling, seed=seed, session=session):
                time.sleep(0.05)
                yield item

    policy = Slow("a" * 60, "still here")
    proxy, client = served(policy)
    with requests.post(f"{client.base_url}chat/completions", stream=True, timeout=30, headers={"X-Session-Id": "s"},
                       json={"messages": [{"role": "user", "content": "q"}], "stream": True}) as r:
        first = next(r.iter_lines())
        assert first.startswith(b"data: ")
    time.sleep(3.5)  # longer than the whole reply takes: had the proxy streamed on, it would have recorded it
    assert proxy.served == 0 and proxy.book.open_sessions == 0  # never delivered, never trained on
    again = client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "q"}])
    assert again.choices[0].message.content == "still here"
