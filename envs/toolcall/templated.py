"""The templated tool-call suite (`env.suite=templated`): short requests over three small tools
(envs/toolcall/tools/basics.py), drawn from seeds, in reach of a small model.

Six templates, from one call to three: convert a value between units; evaluate an arithmetic
expression; look up a city's country, population or elevation; a city's elevation in feet (lookup,
then convert); two cities' combined population (two lookups, then add); how much higher one city
lies than another (two lookups, then subtract). The mix leans on the multi-call templates: after a
warm start on a few dozen demonstrations the single calls are nearly always right, the chains not.

Every instance is distinct, and train and test never share the values an instance is made of: the
split of a number, a sum's operands or a city is fixed by a hash of it, so a test instance asks about
values training never saw.

Grading: the final plain-text answer must contain the expected value (a number within rounding, or
the country's name) and at most `_MAX_NUMBERS` numbers, so listing every number seen does not pass.
Each step carries a verifiable label: a call step `well_formed`, `executed_ok` (no tool error) and
`matches_reference` (every call is a reference call not made before in the episode, compared by
meaning: units and city names case-blind, an expression by its value); the answer step
`answer_correct`.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from envs.toolcall.episode import NOT_RUN, ParsingEpisode, ReplyCaps, Turn, end_turn, error_turn
from envs.toolcall.parse import ToolCall, render_calls, render_tool_responses
from envs.toolcall.tools import ToolError
from envs.toolcall.tools.basics import TOOLS, UNITS, cities, convert_value, evaluate
from envs.toolcall.validate import check_calls
from nextstate.types import NextState, Task

TEST_FRACTION = 0.3  # the share of values (numbers, operand pairs, cities) that only test instances use
# template -> its share of a split; fixed, so train and test ask the same mix
MIX = {"convert": 0.1, "calculate": 0.1, "lookup": 0.25, "feet": 0.15, "sum": 0.2, "diff": 0.2}
_PAIRS = [("km", "mi"), ("mi", "km"), ("m", "ft"), ("ft", "m"), ("kg", "lb"), ("lb", "kg"),
          ("l", "gal"), ("gal", "l"), ("c", "f"), ("f", "c")]
_OPS = {"+": ("plus", "add"), "-": ("minus", "sub"), "*": ("times", "mul")}
_MAX_NUMBERS = 4
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_TOOLS = {t.name: t for t in TOOLS}
_SPECS = {name: t.spec() for name, t in _TOOLS.items()}


def split_of(key: str) -> str:
    """train or test, by a stable hash of the values an instance is made of."""
    bucket = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) / 2**32
    return "test" if bucket < TEST_FRACTION else "train"


@dataclass(frozen=True)
class _Instance:
    task_id: str
    template: str
    question: str
    reference: list[list[ToolCall]]
    answer: str
    expect: float | str  # the number or the name the answer must contain
    difficulty: str


def _call(name: str, **arguments) -> ToolCall:
    return ToolCall(name, arguments)


def _convert_instances(split: str) -> list[tuple[str, Any]]:
    return [(f"{v}-{a}-{b}", (v, a, b)) for v in range(2, 1000) if split_of(f"n{v}") == split
            for a, b in _PAIRS]


def _make_convert(key, rng: random.Random) -> _Instance:
    v, a, b = key
    r = convert_value(v, a, b)
    text = rng.choice(["Convert {v} {a} to {b}.", "How many {b} is {v} {a}?", "What is {v} {a} in {b}?"])
    q = text.format(v=v, a=UNITS[a][0], b=UNITS[b][0])
    return _Instance(f"tpl-convert-{v}-{a}-{b}", "convert", q, [[_call("convert", value=v, from_unit=a, to_unit=b)]],
                     f"{v} {UNITS[a][0]} is {r:g} {UNITS[b][0]}.", r, "easy")


def _calculate_instances(split: str) -> list[tuple[str, Any]]:
    out = []
    for a in range(11, 1000, 7):
        for b in range(11, 1000, 13):
            for op in _OPS:
                if op == "-" and b >= a:
                    continue
                if split_of(f"{a}{op}{b}") == split:
                    out.append((f"{a}{op}{b}", (a, op, b)))
    return out


def _make_calculate(key, rng: random.Random) -> _Instance:
    a, op, b = key
    expr = f"{a} {op} {b}"
    r = int(evaluate(expr))
    q = rng.choice([f"What is {expr}?", f"Compute {a} {_OPS[op][0]} {b}.", f"Calculate {expr} for me."])
    return _Instance(f"tpl-calc-{a}-{_OPS[op][1]}-{b}", "calculate", q, [[_call("calculate", expression=expr)]],
                     f"{expr} = {r}", r, "easy")


def _city_names(split: str) -> list[str]:
    return sorted(row["city"] for row in cities().values() if split_of(row["city"]) == split)


def _lookup_instances(split: str) -> list[tuple[str, Any]]:
    return [(f"{c}-{f}", (c, f)) for c in _city_names(split) for f in ("country", "population", "elevation")]


def _make_lookup(key, rng: random.Random) -> _Instance:
    city, field = key
    row = cities()[city.lower()]
    ref = [[_call("lookup_city", city=city)]]
    slug = f"{city.lower().replace(' ', '-')}-{field}"
    if field == "country":
        q = rng.choice([f"Which country is {city} in?", f"In what country is {city}?"])
        return _Instance(f"tpl-lookup-{slug}", "lookup", q, ref, f"{city} is in {row['country']}.",
                         row["country"], "easy")
    if field == "population":
        p = row["population_millions"]
        q = rng.choice([f"What is the population of {city}, in millions?", f"How many million people live in {city}?"])
        return _Instance(f"tpl-lookup-{slug}", "lookup", q, ref, f"{city} has about {p:g} million people.", p, "easy")
    e = row["elevation_m"]
    q = rng.choice([f"How high above sea level is {city}, in metres?", f"What is the elevation of {city} in metres?"])
    return _Instance(f"tpl-lookup-{slug}", "lookup", q, ref, f"{city} is {e} m above sea level.", e, "easy")


def _feet_instances(split: str) -> list[tuple[str, Any]]:
    return [(c, c) for c in _city_names(split)]


def _make_feet(city, rng: random.Random) -> _Instance:
    e = cities()[city.lower()]["elevation_m"]
    ft = convert_value(e, "m", "ft")
    q = rng.choice([f"How high above sea level is {city}, in feet?", f"What is the elevation of {city} in feet?"])
    ref = [[_call("lookup_city", city=city)], [_call("convert", value=e, from_unit="m", to_unit="ft")]]
    return _Instance(f"tpl-feet-{city.lower().replace(' ', '-')}", "feet", q, ref,
                     f"{city} is {ft:g} feet above sea level.", ft, "medium")


def _sum_instances(split: str) -> list[tuple[str, Any]]:
    names = _city_names(split)
    return [(f"{a}+{b}", (a, b)) for i, a in enumerate(names) for b in names[i + 1:]]


def _make_sum(key, rng: random.Random) -> _Instance:
    a, b = rng.sample(list(key), 2)  # which city the request names first
    pa, pb = cities()[a.lower()]["population_millions"], cities()[b.lower()]["population_millions"]
    expr = f"{pa:g} + {pb:g}"
    total = round(evaluate(expr), 2)
    q = rng.choice([f"How many people live in {a} and {b} together, in millions?",
                    f"What is the combined population of {a} and {b}, in millions?"])
    ref = [[_call("lookup_city", city=a), _call("lookup_city", city=b)], [_call("calculate", expression=expr)]]
    slug = "-".join(c.lower().replace(" ", "-") for c in sorted(key))
    return _Instance(f"tpl-sum-{slug}", "sum", q, ref, f"Together about {total:g} million people.", total, "hard")


def _make_diff(key, rng: random.Random) -> _Instance:
    a, b = sorted(key, key=lambda c: -cities()[c.lower()]["elevation_m"])  # a lies higher
    ea, eb = cities()[a.lower()]["elevation_m"], cities()[b.lower()]["elevation_m"]
    expr = f"{ea} - {eb}"
    q = rng.choice([f"How much higher is {a} than {b}, in metres?",
                    f"By how many metres does {a} lie above {b}?"])
    ref = [[_call("lookup_city", city=a), _call("lookup_city", city=b)], [_call("calculate", expression=expr)]]
    slug = "-".join(c.lower().replace(" ", "-") for c in sorted(key))
    return _Instance(f"tpl-diff-{slug}", "diff", q, ref, f"{a} lies {ea - eb} m higher than {b}.", ea - eb, "hard")


def _diff_instances(split: str) -> list[tuple[str, Any]]:
    elevation = {c: cities()[c.lower()]["elevation_m"] for c in _city_names(split)}
    return [(key, pair) for key, pair in _sum_instances(split) if elevation[pair[0]] != elevation[pair[1]]]


_TEMPLATES = {"convert": (_convert_instances, _make_convert), "calculate": (_calculate_instances, _make_calculate),
              "lookup": (_lookup_instances, _make_lookup), "feet": (_feet_instances, _make_feet),
              "sum": (_sum_instances, _make_sum), "diff": (_diff_instances, _make_diff)}


def _counts(total: int) -> dict[str, int]:
    counts = {t: int(total * share) for t, share in MIX.items()}
    for t in list(MIX)[: total - sum(counts.values())]:  # the rounding remainder, to the first templates
        counts[t] += 1
    return counts


def generate(split: str, n: int, seed: int = 0) -> list[Task]:
    """`n` distinct instances of `split`, the same for the same (split, n, seed)."""
    tasks = []
    for template, count in _counts(n).items():
        candidates, make = _TEMPLATES[template]
        pool = candidates(split)
        if count > len(pool):
            raise ValueError(f"templated suite: {count} {split} instances of {template!r} asked, "
                             f"{len(pool)} exist")
        rng = random.Random(f"{seed}/{template}/{split}")
        for _, key in sorted(rng.sample(pool, count), key=lambda kv: kv[0]):
            tasks.append(_task(make(key, rng), split))
    return tasks


def load_templated(split: str | None, n_train: int, n_test: int, seed: int) -> list[Task]:
    parts = ["train", "test"] if split in (None, "all") else [split]
    return [t for s in parts for t in generate(s, n_train if s == "train" else n_test, seed)]


def _task(inst: _Instance, split: str) -> Task:
    return Task(task_id=inst.task_id, env="toolcall", instruction=inst.question, split=split,
                difficulty=inst.difficulty, tags=("templated", inst.template),
                data={"kind": "templated", "reference": inst.reference, "answer": inst.answer,
                      "expect": inst.expect})


# -- the episode ----------------------------------------------------------------------------------
def tools_for(task: Task) -> list[dict[str, Any]]:
    return [t.schema() for t in TOOLS]


def reference_actions(task: Task) -> list[str]:
    return [render_calls(step) for step in task.data["reference"]] + [task.data["answer"]]


def start_episode(task: Task, env) -> "TemplatedEpisode":
    return TemplatedEpisode(task, env.config.obs_max_chars, ReplyCaps.of(env.config))


def answer_is_correct(answer: str, expect: float | str) -> bool:
    numbers = [float(m.replace(",", "")) for m in _NUMBER.findall(answer)]
    if len(numbers) > _MAX_NUMBERS:
        return False
    if isinstance(expect, str):
        return re.search(rf"\b{re.escape(expect.lower())}\b", answer.lower()) is not None
    return any(abs(x - expect) <= max(0.011, 0.001 * abs(expect)) for x in numbers)


def same_call(call: ToolCall, ref: ToolCall) -> bool:
    """The same call by meaning: units and city names case-blind, numbers within 1e-6, expressions
    by their value."""
    if call.name != ref.name or set(call.arguments) != set(ref.arguments):
        return False
    a, r = call.arguments, ref.arguments
    if call.name == "calculate":
        try:
            return abs(evaluate(str(a["expression"])) - evaluate(str(r["expression"]))) < 1e-6
        except ToolError:
            return False
    if call.name == "convert":
        return (abs(float(a["value"]) - float(r["value"])) < 1e-6
                and str(a["from_unit"]).lower() == r["from_unit"] and str(a["to_unit"]).lower() == r["to_unit"])
    return " ".join(str(a["city"]).split()).lower() == r["city"].lower()


class TemplatedEpisode(ParsingEpisode):
    def __init__(self, task: Task, obs_max_chars: int, caps: ReplyCaps):
        super().__init__(task, obs_max_chars, caps)
        self.reference = [c for step in task.data["reference"] for c in step]
        self.pending = list(self.reference)  # the reference calls not made yet in this episode
        self.answer: str | None = None

    def on_calls(self, reply) -> Turn:
        canon, problem = check_calls(reply.calls, _SPECS)
        if problem:
            return error_turn(problem, label=NOT_RUN)
        blocks, errors = [], 0
        for call in canon:
            try:
                out = _TOOLS[call.name].fn(None, **call.arguments)
            except ToolError as e:
                out, errors = {"error": str(e)}, errors + 1
            blocks.append(render_tool_responses([json.dumps(out, ensure_ascii=False)], self.obs_max_chars))
        text = "\n".join(blocks)
        ns = NextState(kind="tool", text=text, fields={"calls": [c.name for c in canon], "errors": errors})
        label = {"well_formed": True, "executed_ok": errors == 0, "matches_reference": self._progress(canon)}
        return Turn(ns, text, step_label=label)

    def _progress(self, calls) -> bool:
        """Every call is a reference call not made before in this episode (each is then made). A call
        that repeats one already made is no progress: labelled right, it paid a judge's +1 for calling
        again instead of answering, and PRM training learned to call until the steps ran out."""
        ok = True
        for call in calls:
            i = next((k for k, ref in enumerate(self.pending) if same_call(call, ref)), None)
            if i is None:
                ok = False
            else:
                self.pending.pop(i)
        return ok

    def on_text(self, text: str) -> Turn:
        self.answer = text
        end = end_turn()
        return Turn(end.next_state, end.obs, done=True,
                    step_label={"answer_correct": answer_is_correct(text, self.task.data["expect"])})

    def on_malformed(self, reason: str) -> Turn:
        return error_turn(reason, label=NOT_RUN)

    def grade(self) -> tuple[float, dict]:
        if self.answer is None:
            return 0.0, {"test_output": "no final answer"}
        ok = answer_is_correct(self.answer, self.task.data["expect"])
        expect = self.task.data["expect"]
        return float(ok), {"test_output": "answer correct" if ok else f"answer lacks {expect!r}: {self.answer[:200]!r}"}

    def close(self) -> None:
        pass
