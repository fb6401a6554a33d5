"""The requests a stock OpenClaw 2026.9.6 sends (`openclaw agent --local`, an `openai-completions`
provider, recorded by a stand-in server and trimmed: the system prompt is ~7 kB, ~1,900 tokens) train
through the proxy without a header: each turn streams, the reply comes back in the next history (a
call's id rewritten, its arguments re-encoded) and pairs with its next state; OpenClaw's compacted
history, which holds the waiting reply only inside its summary, is a new conversation, not a 409 (the
reply stays unpaired); and
a prompt over the budget gets the `context_length_exceeded` error that OpenClaw reads to compact.
`make openclaw-check` runs the real client against the real proxy."""
import json

from agents.serving.transformers_policy import SamplingConfig
from tests.trainers.proxy.test_openai_wire import ScriptedPolicy, words
from trainers.gate import Gate
from trainers.proxy.server import Proxy
from trainers.proxy.sessions import SessionBook

SYSTEM = ("<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant running inside OpenClaw.\n## Tooling\n"
          "Tools policy-filtered. Names case-sensitive; call exact.\n- gateway: Read this Gateway's config/schema\n"
          "- session_status: Session/model/usage/time/status; model override\n<!-- /openclaw:attempt:STABLE -->\n"
          "<!-- openclaw:attempt:DYNAMIC -->\n## Runtime\nCurrent model identity: nextstate/smollm2-135m-instruct.\n"
          "<!-- /openclaw:attempt:DYNAMIC -->")
RUNTIME = ("\n\nRuntime: agent=main | session=agent:main:explicit:c1 | sessionId=c1 | host=vm | os=Linux (x64) | "
           "node=v24.22.3 | model=nextstate/smollm2-135m-instruct | default_model=nextstate/smollm2-135m-instruct")
TOOLS = [{"type": "function", "function": {
             "name": "gateway", "description": "Update OpenClaw with update.run on an explicit owner request.",
             "parameters": {"type": "object", "required": ["action"], "properties": {
                 "action": {"enum": ["update.run"], "type": "string"}, "note": {"type": "string"}}}}},
         {"type": "function", "function": {
             "name": "session_status", "description": "Show visible-session model/usage/time/cost/tasks.",
             "parameters": {"type": "object", "properties": {
                 "sessionKey": {"type": "string"}, "model": {"type": "string"},
                 "changesSince": {"type": "integer", "minimum": 0}}}}}]
CALL = 'Let me check. <tool_call>\n{"name": "session_status", "arguments": {"sessionKey": "current"}}\n</tool_call>'
STATUS = "🦞 OpenClaw 2026.9.6 (eb377ac)\nCurrent time: Friday, December 4th, 2026 - 3:47 AM (UTC)\n⏱️ Uptime: 31s"
U = lambda text: {"role": "user", "content": text}  # noqa: E731
A = lambda text: {"role": "assistant", "content": text}  # noqa: E731


def body(*messages) -> dict:
    """A request as OpenClaw sends it: streamed with usage, max_completion_tokens, tool_choice auto."""
    return {"model": "smollm2-135m-instruct", "messages": [{"role": "system", "content": SYSTEM}, *messages],
            "stream": True, "stream_options": {"include_usage": True}, "tool_choice": "auto",
            "max_completion_tokens": 96, "tools": TOOLS}


def turn(proxy: Proxy, request: dict) -> dict:
    """One streamed request, read to its end as OpenClaw reads it: the assistant message it shows."""
    status, events, headers = proxy.chat(request, {})
    assert status == 200, events
    try:
        raw = b"".join(events).decode()
    finally:
        events.close()
    chunks = [json.loads(e[len("data: "):]) for e in raw.split("\n\n") if e and e != "data: [DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert chunks[-1]["usage"]["completion_tokens"] > 0  # stream_options.include_usage
    return {"content": "".join(d.get("content") or "" for d in deltas), "calls": calls}


def test_a_stock_openclaw_conversation_trains_without_headers():
    proxy = Proxy(ScriptedPolicy("Hello!", CALL, "It is 3:47.", "Bye.", "8"), Gate(0), SessionBook(),
                  SamplingConfig(96, 1.0, 1.0, 512), "smollm2-135m-instruct", prompt_tokens=words)
    first = U("[Fri 2026-12-04 03:46 UTC] Hi there" + RUNTIME)  # the Runtime line only on the first message
    assert turn(proxy, body(first))["content"] == "Hello!"
    history = [first, A("Hello!"), U("[Fri 2026-12-04 03:47 UTC] Tell me your STATUS please")]
    shown = turn(proxy, body(*history))
    assert shown["content"] == "Let me check. "  # streamed as it was sampled, up to the call
    assert [c["function"]["name"] for c in shown["calls"]] == ["session_status"]
    # OpenClaw echoes the call with the id's underscore dropped and the arguments re-encoded compactly,
    # and answers with the tool's result under that id
    call_id = shown["calls"][0]["id"].replace("_", "")
    history += [{"role": "assistant", "content": "Let me check. ", "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "session_status", "arguments": '{"sessionKey":"current"}'}}]},
                {"role": "tool", "content": STATUS, "tool_call_id": call_id}]
    assert turn(proxy, body(*history))["content"] == "It is 3:47."
    history += [A("It is 3:47."), U("[Fri 2026-12-04 03:48 UTC] Thanks")]
    assert turn(proxy, body(*history))["content"] == "Bye."
    steps = [proxy.book.steps.get_nowait() for _ in range(3)]
    assert len({s.session for s in steps}) == 1 and proxy.book.steps.empty()
    assert [(s.step.action_text, s.step.next_state.kind) for s in steps] == \
        [("Hello!", "user"), (CALL, "tool"), ("It is 3:47.", "user")]
    assert steps[0].step.next_state.text == "[Fri 2026-12-04 03:47 UTC] Tell me your STATUS please"
    assert steps[1].step.next_state.text == STATUS
    # compacted: the waiting reply ("Bye.") only inside the summary, then the new message and OpenClaw's nudge
    summary = [{"type": "text", "text": "The conversation history before this point was compacted into the "
                "following summary:\n\n<summary>\n## Recent turns preserved verbatim\n- User: Thanks\n"
                "- Assistant: Bye.\n</summary>"}]
    compacted = body({"role": "user", "content": summary}, U("[Fri 2026-12-04 03:49 UTC] And 4+4?"),
                     U("[Fri 2026-12-04 03:49 UTC] Continue the current task from the existing transcript, "
                       "preserving completed work."))
    assert turn(proxy, compacted)["content"] == "8"  # a new conversation: served, never a 409
    assert proxy.book.open_sessions == 2 and proxy.book.steps.empty()  # "Bye." waits on, unpaired
    assert proxy.served == 5 and proxy.recorded == 3


def test_a_prompt_over_the_budget_gets_the_error_openclaw_compacts_on():
    proxy = Proxy(ScriptedPolicy(), Gate(0), SessionBook(), SamplingConfig(96, 1.0, 1.0, 64),
                  "smollm2-135m-instruct", prompt_tokens=words)
    status, error, _ = proxy.chat(body(U("[Fri 2026-12-04 03:46 UTC] Hi there" + RUNTIME)), {})
    assert status == 400
    assert error["error"]["code"] == "context_length_exceeded" and error["error"]["param"] == "messages"
    assert error["error"]["message"].startswith("This model's maximum context length is 64 tokens")
    assert proxy.served == 0 and proxy.book.open_sessions == 0
