"""Three small stateless tools for the templated tool-call suite: a unit converter, a city lookup and
a calculator. They keep the schema the policy reads short (the whole prompt stays under 400 tokens
at the default model), and every answer they give is exact, so a task's answer is known in advance.

The city figures (cities.csv) are rounded, approximate values: they are the tool's data, and the
tasks are graded against the tool, not against the world.
"""
from __future__ import annotations

import ast
import csv
import functools
import math
import operator
from pathlib import Path

from envs.toolcall.tools import Param, Tool, ToolError

CITIES_CSV = Path(__file__).with_name("cities.csv")

# unit -> (its name in a request, (to the base unit: scale, offset)); base units: m, kg, l, c
UNITS: dict[str, tuple[str, tuple[float, float]]] = {
    "km": ("kilometres", (1000.0, 0.0)), "mi": ("miles", (1609.344, 0.0)),
    "m": ("metres", (1.0, 0.0)), "ft": ("feet", (0.3048, 0.0)),
    "kg": ("kilograms", (1.0, 0.0)), "lb": ("pounds", (0.45359237, 0.0)),
    "l": ("litres", (1.0, 0.0)), "gal": ("US gallons", (3.785411784, 0.0)),
    "c": ("degrees Celsius", (1.0, 0.0)), "f": ("degrees Fahrenheit", (5 / 9, -32.0)),
}
_DIMENSION = {"km": "length", "mi": "length", "m": "length", "ft": "length", "kg": "mass", "lb": "mass",
              "l": "volume", "gal": "volume", "c": "temperature", "f": "temperature"}


@functools.lru_cache(maxsize=1)
def cities() -> dict[str, dict]:
    """City name (lower case) -> its row: city, country, population_millions, elevation_m."""
    with CITIES_CSV.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["city"].lower(): {"city": r["city"], "country": r["country"],
                                "population_millions": float(r["population_millions"]),
                                "elevation_m": int(r["elevation_m"])} for r in rows}


def convert_value(value: float, from_unit: str, to_unit: str) -> float:
    """`value` in `from_unit` expressed in `to_unit`, rounded to 2 decimals."""
    if _DIMENSION[from_unit] != _DIMENSION[to_unit]:
        raise ToolError(f"cannot convert {from_unit} ({_DIMENSION[from_unit]}) to {to_unit} "
                        f"({_DIMENSION[to_unit]})")
    scale, offset = UNITS[from_unit][1]
    base = (value + offset) * scale
    scale, offset = UNITS[to_unit][1]
    return round(base / scale - offset, 2)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(expression: str) -> float:
    """+ - * / and parentheses over numbers; anything else is a ToolError the agent reads."""
    if len(expression) > 200:
        raise ToolError("expression too long (at most 200 characters)")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse {expression!r}: use numbers, + - * / and parentheses") from None

    def walk(node) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Div) and right == 0:
                raise ToolError("division by zero")
            return _OPS[type(node.op)](left, right)
        raise ToolError(f"cannot evaluate {expression!r}: use numbers, + - * / and parentheses")

    result = walk(tree)
    if not math.isfinite(result):
        raise ToolError("the result is not a finite number")
    return round(result, 6)


def _convert(ctx, value: float, from_unit: str, to_unit: str) -> dict:
    return {"result": convert_value(float(value), _unit(from_unit), _unit(to_unit)), "unit": to_unit}


def _lookup_city(ctx, city: str) -> dict:
    row = cities().get(" ".join(city.split()).lower())
    if row is None:
        raise ToolError(f"no data for city {city!r}")
    return dict(row)


def _calculate(ctx, expression: str) -> dict:
    result = evaluate(expression)
    return {"result": int(result) if result == int(result) else result}


_UNIT_LIST = ", ".join(UNITS)


def _unit(name: str) -> str:
    if name not in UNITS:
        raise ToolError(f"unknown unit {name!r}; units: {_UNIT_LIST}")
    return name


TOOLS = [
    Tool("convert", f"Convert a value between units ({_UNIT_LIST}).",
         {"value": Param("number", ""), "from_unit": Param("string", ""), "to_unit": Param("string", "")}, _convert),
    Tool("lookup_city", "A city's country, population (millions), elevation (m).",
         {"city": Param("string", "")}, _lookup_city),
    Tool("calculate", "Evaluate arithmetic like 12 * (3 + 4).",
         {"expression": Param("string", "")}, _calculate),
]
