"""Fast tests, no Docker: how a reply becomes tool calls, and which calls the tools accept."""
import pytest

from envs.toolcall.parse import ToolCall, parse_reply, render_calls, render_tool_responses
from envs.toolcall.validate import ToolSpec, check_calls, spec_from_schema

SPECS = {
    "get_order": ToolSpec("get_order", {"order_id": "integer"}, frozenset({"order_id"})),
    "set_price": ToolSpec("set_price", {"sku": "string", "price": "number"}, frozenset({"sku", "price"})),
    "search": ToolSpec("search", {"query": "string", "tags": "array", "opts": "dict", "x": "any"}, frozenset()),
}


@pytest.mark.parametrize("reply,calls,text", [
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": 3}}</tool_call>',
     [("get_order", {"order_id": 3})], ""),
    ('Let me check.\n<tool_call>\n  {"name": "get_order",\n "arguments": {"order_id": 3}}  \n</tool_call>\n',
     [("get_order", {"order_id": 3})], "Let me check."),
    ('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": [1]}}'
     '</tool_call>', [("a", {}), ("b", {"x": [1]})], ""),
    ('<tool_call>{"name": "ping"}</tool_call>', [("ping", {})], ""),  # no arguments = none
    ("The answer is 42.", [], "The answer is 42."),
    ('<think>maybe <tool_call>{"name": "x", "arguments": {}}</tool_call>?</think>The answer is 42.', [],
     "The answer is 42."),  # a call in the reasoning is not made
    ('<think>\nplan\n</think>\n<tool_call>{"name": "x", "arguments": {}}</tool_call>', [("x", {})], ""),
])
def test_parse_valid(reply, calls, text):
    p = parse_reply(reply)
    assert p.error is None
    assert [(c.name, c.arguments) for c in p.calls] == calls
    assert p.text == text and p.source == reply


@pytest.mark.parametrize("reply,reason", [
    ("", "empty reply"),
    ("   \n ", "empty reply"),
    ("<tool_call>{'name': 'get_order', 'arguments': {}}</tool_call>", "not valid JSON"),  # Python, not JSON
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": 3},}</tool_call>', "not valid JSON"),
    ('<tool_call>{"name": "f", "arguments": {"x": NaN}}</tool_call>', "not valid JSON"),
    ('<tool_call>{"name": "get_order", "arguments": {"order_id": 3}}', "unbalanced"),
    ('<tool_call>["get_order", 3]</tool_call>', "JSON object"),
    ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
    ('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>', '"arguments" must be a JSON object'),
    ('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{bad}</tool_call>', "tool call 2"),
    (None, "must be text"),
    # a block ends at the first closing tag, as a regex would cut it; text outside blocks keeps its tags
    ('<tool_call>{"name": "f", "arguments": {"x": "</tool_call>"}}</tool_call>', "unbalanced"),
    ('<tool_call><tool_call>{"name": "f"}</tool_call>', "not valid JSON"),
    ('<tool_<tool_call>{"name": "f"}</tool_call>call>', "unbalanced"),
    ('<tool_call>{"name": "f"}</tool_call> and <tool_call>', "unbalanced"),
    ('<tool_call>\u3000{"name": "f"}</tool_call>', "not valid JSON"),  # JSON whitespace only
    ('<tool_call>{"name": "f"} {}</tool_call>', "not valid JSON"),
    ('<tool_call>{"name": "f", "arguments": null}</tool_call>', '"arguments" must be a JSON object'),
])
def test_parse_malformed_is_a_reason_not_an_exception(reply, reason):
    p = parse_reply(reply)
    assert p.error and reason in p.error and not p.calls


def test_random_replies_get_calls_or_a_reason_never_an_exception():
    """Fuzzed replies (tags cut in half, blocks that are not calls, JSON of every wrong shape): each one
    gives well-formed calls or a reason the model can read, and never both."""
    import random

    from envs.toolcall.parse import scan_calls

    pieces = ["<tool_call>", "</tool_call>", "<tool_", "call>", " ", "\n", "\t", "text", '{"name": "f"}',
              '{"name": " g ", "arguments": {"x": [1, "</tool_call>"]}}', '{"name": 3}', '{"name": ""}',
              '{"arguments": {}}', "[1]", '"s"', "{bad}", '{"name": "f", "arguments": null}', "null", "{}",
              '{"name": "f", "arguments": {}} {}', '{"name": ["f"]}', '{"name": "h", "arguments": []}']
    rng = random.Random(0)
    for _ in range(20_000):
        reply = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        calls, text, error = scan_calls(reply)
        if error is not None:
            assert isinstance(error, str) and error and not calls, reply
        for name, arguments in calls:
            assert isinstance(name, str) and name.strip() and isinstance(arguments, dict), reply


def test_whitespace_inside_blocks_and_the_text_around_them():
    p = parse_reply(' Hi <tool_call>\n\t{"name": " a ", "arguments": {}} \r\n</tool_call> there ')
    assert p.error is None and [(c.name, c.arguments) for c in p.calls] == [("a", {})] and p.text == "Hi  there"


def test_render_roundtrip():
    calls = [ToolCall("get_order", {"order_id": 3}), ToolCall("search", {"query": "é", "tags": ["a"]})]
    p = parse_reply(render_calls(calls))
    assert p.error is None and list(p.calls) == calls


def test_tool_responses_are_blocks_and_capped():
    text = render_tool_responses(['{"a": 1}', "x" * 50], max_chars=10)
    assert text.count("<tool_response>") == 2 and "[... 40 characters cut ...]" in text


@pytest.mark.parametrize("call,problem", [
    (ToolCall("get_order", {"order_id": 3}), None),
    (ToolCall("set_price", {"sku": "A", "price": 5}), None),  # an int is a number
    (ToolCall("search", {"x": {"any": "thing"}, "opts": {}, "tags": []}), None),
    (ToolCall("nope", {}), "unknown tool 'nope'"),
    (ToolCall("get_order", {}), "missing required argument(s) 'order_id'"),
    (ToolCall("get_order", {"order_id": 3, "verbose": True}), "unknown argument(s) 'verbose'"),
    (ToolCall("get_order", {"order_id": "3"}), "'order_id': expected integer, got string"),
    (ToolCall("get_order", {"order_id": 3.5}), "expected integer, got number"),
    (ToolCall("get_order", {"order_id": True}), "expected integer, got boolean"),
    (ToolCall("set_price", {"sku": "A", "price": None}), "expected number, got null"),
    (ToolCall("search", {"tags": "a,b"}), "expected array, got string"),
    (ToolCall("get_order", {"order_id": "3", "verbose": True}), "unknown argument(s) 'verbose'"),  # in order
    (ToolCall("set_price", {"sku": 1}), "missing required argument(s) 'price'"),
    (ToolCall("search", {"query": "q", "tags": "t"}), "'tags': expected array, got string"),
])
def test_check_calls(call, problem):
    _, got = check_calls([call], SPECS)
    assert got == problem if problem is None else problem in got


def test_a_reply_is_rejected_as_a_whole_and_aliases_resolve():
    ok, problem = check_calls([ToolCall("get.order", {"order_id": 1}), ToolCall("get_order", {})], SPECS,
                              aliases={"get.order": "get_order"})
    assert problem and "missing" in problem and [c.name for c in ok] == ["get_order"]


def test_spec_from_openai_schema():
    spec = spec_from_schema({"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}})
    assert spec == ToolSpec("f", {"a": "string"}, frozenset({"a"}))


def test_argument_problems_on_random_calls_never_pass_a_bad_call():
    """Random specs and arguments: a call that passes has every required argument and no unknown one,
    and one that fails says why in words; nothing raises."""
    import random

    from envs.toolcall.validate import _PY_TYPES, _arguments_problem

    type_names = [*_PY_TYPES, "any", "weird", None, 5]
    values = ["s", 1, 1.5, True, None, [1], {"a": 1}, (1,)]
    rng = random.Random(0)
    for _ in range(20_000):
        names = rng.sample("abcdef", rng.randint(0, 4))
        spec = ToolSpec("f", {n: rng.choice(type_names) for n in names},
                        frozenset(n for n in names if rng.random() < 0.5))
        args = {n: rng.choice(values) for n in rng.sample("abcdefg", rng.randint(0, 4))}
        problem = _arguments_problem(args, spec, True)
        if problem is None:
            assert spec.required <= args.keys() and args.keys() <= spec.types.keys(), (spec, args)
        else:
            assert isinstance(problem, str) and problem, (spec, args)
