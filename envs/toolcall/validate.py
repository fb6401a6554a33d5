"""Is a parsed call one the tools accept? Unknown tool, unknown or missing argument, wrong type.

Each suite describes its tools as `ToolSpec`s (names, top-level argument types, required ones); the
check is deliberately shallow (top-level types only) so that it never rejects what the suite's own
grader would accept: nested values are the grader's business. Type names are JSON-schema names plus
BFCL's ("dict", "float", "tuple", "any"); an int is accepted where a number is expected, a bool never.
"""
from __future__ import annotations

from dataclasses import dataclass

from envs.toolcall.parse import ToolCall

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "str": (str,), "char": (str,),
    "integer": (int,), "int": (int,),
    "number": (int, float), "float": (int, float), "double": (int, float),
    "boolean": (bool,), "bool": (bool,),
    "array": (list,), "list": (list,), "tuple": (list,),
    "object": (dict,), "dict": (dict,),
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    types: dict[str, str | None]  # argument -> type name (None: any)
    required: frozenset[str] = frozenset()


def type_error(value, type_name: str | None) -> str | None:
    accepted = _PY_TYPES.get(type_name or "")
    if accepted is None:  # "any", or a type this check does not know: the grader decides
        return None
    if isinstance(value, bool) and bool not in accepted:
        return f"expected {type_name}, got boolean"
    if not isinstance(value, accepted):
        got = {str: "string", int: "integer", float: "number", list: "array", dict: "object",
               type(None): "null"}.get(type(value), type(value).__name__)
        return f"expected {type_name}, got {got}"
    return None


def check_call(call: ToolCall, spec: ToolSpec, check_types: bool = True) -> str | None:
    """The reason `call` is not acceptable to `spec`, or None."""
    return _arguments_problem(call.arguments, spec, check_types)


def _arguments_problem(args: dict, spec: ToolSpec, check_types: bool) -> str | None:
    """The first problem, in order: unknown arguments, missing ones, wrong types."""
    types = spec.types
    if not args.keys() <= types.keys():
        unknown = sorted(args.keys() - types.keys())
        takes = ", ".join(map(repr, types)) or "no arguments"
        return f"{spec.name}: unknown argument(s) {', '.join(map(repr, unknown))}; it takes {takes}"
    if not spec.required <= args.keys():
        missing = sorted(spec.required - args.keys())
        return f"{spec.name}: missing required argument(s) {', '.join(map(repr, missing))}"
    if check_types:
        for arg, value in args.items():
            problem = type_error(value, types[arg])
            if problem:
                return f"{spec.name}: argument {arg!r}: {problem}"
    return None


def check_calls(calls: tuple[ToolCall, ...] | list[ToolCall], specs: dict[str, ToolSpec],
                aliases: dict[str, str] | None = None, *, check_types: bool = True
                ) -> tuple[list[ToolCall], str | None]:
    """Canonical calls (aliases resolved) and the first problem, if any. A reply is accepted or
    rejected as a whole, so that parallel calls never run half."""
    out = []
    for call in calls:
        name = (aliases or {}).get(call.name, call.name)
        problem = _call_problem(call.name, name, call.arguments, specs, check_types)
        if problem:
            return out, problem
        out.append(ToolCall(name, call.arguments))
    return out, None


def _call_problem(name: str, canonical: str, args: dict, specs: dict[str, ToolSpec], check_types: bool) -> str | None:
    spec = specs.get(canonical)
    return _unknown_tool(name, specs) if spec is None else _arguments_problem(args, spec, check_types)


def _unknown_tool(name: str, specs: dict[str, ToolSpec]) -> str:
    return f"unknown tool {name!r}; the tools are: {', '.join(sorted(specs)) or 'none'}"


def spec_from_schema(schema: dict) -> ToolSpec:
    """A ToolSpec from a JSON-schema-style function description (`parameters.properties`)."""
    fn = schema.get("function", schema)
    params = fn.get("parameters") or {}
    props = params.get("properties") or {}
    return ToolSpec(fn["name"], {k: (v or {}).get("type") for k, v in props.items()},
                    frozenset(params.get("required") or ()))
