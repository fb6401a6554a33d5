"""Is a parsed call one the tools accept? Unknown tool, unknown or missing argument, wrong type.

Each suite describes its tools as `ToolSpec`s (names, top-level argument types, required ones); the
check is deliberately shallow (top-level types only) so that it never rejects what the suite's own
grader would accept: nested values are the grader's business. Type names are JSON-schema names plus
BFCL's ("dict", "float", "tuple", "any"); an int is accepted where a number is expected, a bool never.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from envs.toolcall.parse import ToolCall

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "str": (str,), "char": (str,),
    "integer": (int,), "int": (int,),
    "number": (int, float), "float": (int, float), "double": (int, float),
    "boolean": (bool,), "bool": (bool,),
    "array": (list,), "list": (list,), "tuple": (list,),
    "object": (dict,), "dict": (dict,),
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    types: dict[str, str | None]  # argument -> type name (None: any)
    required: frozenset[str] = frozenset()
    # argument -> the classes of the JSON values `type_error` accepts (None: any), so that the usual
    # case takes one lookup; a value of any other class is left to `type_error` itself. A slot, not a
    # cached property: graders check thousands of entries' specs, and the instance dict a cached
    # property lives in is one more (often cold) object to reach per call.
    classes: dict[str, frozenset[type] | None] = field(init=False, repr=False, compare=False)
    takes: str = field(init=False, repr=False, compare=False)  # the arguments, as an error lists them

    def __post_init__(self):
        object.__setattr__(self, "classes", {arg: _json_classes(t) for arg, t in self.types.items()})
        object.__setattr__(self, "takes", ", ".join(map(repr, self.types)) or "no arguments")


def _json_classes(type_name) -> frozenset[type] | None:
    if type_name is not None and not isinstance(type_name, str):
        return frozenset()  # not a type name: `type_error` decides
    accepted = _PY_TYPES.get(type_name or "")
    if accepted is None:
        return None
    return frozenset(c for c in (str, int, float, bool, list, dict, type(None))
                     if issubclass(c, accepted) and (c is not bool or bool in accepted))


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
    if check_types:  # one pass settles the usual case (every argument known, of its type, none missing)
        classes = spec.classes
        try:
            for arg, value in args.items():
                accepted = classes[arg]
                if accepted is not None and value.__class__ not in accepted:
                    break
            else:
                if spec.required <= args.keys():
                    return None
        except KeyError:  # an unknown argument
            pass
    return _explain(args, spec, check_types)


def _explain(args: dict, spec: ToolSpec, check_types: bool) -> str | None:
    """The first problem, in order: unknown arguments, missing ones, wrong types."""
    types = spec.types
    if not args.keys() <= types.keys():
        unknown = sorted(args.keys() - types.keys())
        return f"{spec.name}: unknown argument(s) {', '.join(map(repr, unknown))}; it takes {spec.takes}"
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


def first_problem(calls: list[tuple[str, dict]], specs: dict[str, ToolSpec], aliases: dict[str, str] | None = None,
                  *, check_types: bool = True) -> str | None:
    """`check_calls(...)[1]` on (name, arguments) pairs: for graders that need only the reason."""
    for name, args in calls:
        spec = specs.get(aliases.get(name, name) if aliases else name)
        problem = _unknown_tool(name, specs) if spec is None else _arguments_problem(args, spec, check_types)
        if problem:
            return problem
    return None


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
