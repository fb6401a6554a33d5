"""Persona suites for `nextstate/Chat-v0`: simulated users with a hidden, persistent preference.

A persona file (envs/tasks/personas/<name>.yaml, format in that folder's README) generates one-request
tasks from request templates and word lists. The user's wants are the same for every request, but
they are never said up front: they show only in the user's complaints, each picked per request from
several phrasings, so a policy has to learn the preference from the next state rather than copy one
sentence. Train and test requests draw on separate word lists, so the test requests are unseen.
A file's `distinct` slot (the question) is drawn without replacement: each request of a split asks
a different one, so a split of n requests is n questions, not a few in varied wrappers.

Earlier versions of the suites stay loadable for reproducing results measured on them:
envs/tasks/personas/v2/<name>.yaml, selected as `env.persona=v2/<name>`.

Generation is deterministic (a `random.Random` seeded with the name, version, seed and split) and
pinned by a digest of what it generates: a changed generator or word list fails on load, asking for
a version bump and the new digest (`python -m envs.chat.personas` prints the digests).
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from envs.chat.user import CHECKS, THANKS, Request, _want
from envs.task_formats import TaskFormatError
from nextstate.config import ConfigError
from nextstate.types import Task

PERSONAS_DIR = Path(__file__).resolve().parents[1] / "tasks" / "personas"
SPLITS = ("train", "test")
REQUIRED = ("name", "version", "seed", "wants", "templates", "slots", "train_slots", "test_slots",
            "reference", "n_train", "n_test", "digest")
OPTIONAL = ("difficulty", "thanks", "distinct")
WANT_OPTIONS = ("complaints", "gate", "not_in_request", "instruction")
MIN_PHRASINGS = 3
# `{slot}` or `{slot.field}`; regex quantifiers such as `{2,}` in a `matches` value are left alone
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)(?:\.([a-z_][a-z0-9_]*))?\}")


def _fill(path: Path, template: str, values: dict[str, Any]) -> str:
    """`template` with its placeholders replaced; a list field stands for its first item in text."""
    def one(m: re.Match) -> str:
        name, field = m.groups()
        if name not in values:
            raise TaskFormatError(f"{path}: {{{name}}} in {template!r} is not a slot")
        value = values[name]
        if isinstance(value, dict):
            if field is None or field not in value:
                raise TaskFormatError(f"{path}: {m.group(0)} in {template!r}: slot {name} has fields "
                                      f"{sorted(value)}, write {{{name}.<field>}}")
            value = value[field]
        elif field is not None:
            raise TaskFormatError(f"{path}: {m.group(0)} in {template!r}: slot {name} has no fields")
        return str(value[0] if isinstance(value, list) else value)

    return _PLACEHOLDER.sub(one, template)


def _fill_value(path: Path, value: Any, values: dict[str, Any]) -> Any:
    """A want's value for one request: strings filled; in a list, an item that is exactly one
    placeholder naming a list (`"{work.keys}"`) is replaced by that list's items."""
    if isinstance(value, str):
        return _fill(path, value, values)
    if not isinstance(value, list):
        return value
    out: list = []
    for item in value:
        m = _PLACEHOLDER.fullmatch(item) if isinstance(item, str) else None
        slot = values.get(m.group(1)) if m else None
        if m and isinstance(slot, dict) and isinstance(slot.get(m.group(2)), list):
            out += [str(x) for x in slot[m.group(2)]]
        else:
            out.append(_fill(path, item, values) if isinstance(item, str) else item)
    return out


def _unsaid(path: Path, task_id: str, phrases: list[str], request: str) -> list[str]:
    """The phrases the request does not already say. Without this, "on topic" was met by echoing the
    question: an RL policy learned "The quickest way to cool down a hot room is to cool down a hot
    room." and scored 1.0 on every held-out request of a suite whose keys were the question's words."""
    left = [p for p in phrases if p.lower() not in request.lower()]
    if not left:
        raise TaskFormatError(f"{path}: {task_id}: every phrase of a not_in_request want is in the request "
                              f"{request!r} ({phrases}): add words an answer says and the question does not")
    return left


def _check_shape(path: Path, d: Any) -> None:
    """Everything but the generated requests: keys, types, wants, word lists."""
    if not isinstance(d, dict):
        raise TaskFormatError(f"{path}: a persona file is a mapping (see envs/tasks/personas/README.md)")
    missing = [k for k in REQUIRED if k not in d]
    unknown = sorted(set(d) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise TaskFormatError(f"{path}: missing keys {missing}, unknown keys {unknown}")
    if d["name"] != path.stem:
        raise TaskFormatError(f"{path}: name {d['name']!r} must match the file name")
    for key in ("version", "seed", "n_train", "n_test"):
        if not isinstance(d[key], int) or isinstance(d[key], bool) or d[key] < (0 if key == "seed" else 1):
            raise TaskFormatError(f"{path}: {key} must be a {'non-negative' if key == 'seed' else 'positive'} "
                                  f"integer, got {d[key]!r}")
    templates = d["templates"]
    if not isinstance(templates, list) or not templates or not all(isinstance(t, str) for t in templates):
        raise TaskFormatError(f"{path}: templates must be a non-empty list of strings")
    for key in ("reference", "digest"):
        if not isinstance(d[key], str) or not d[key].strip():
            raise TaskFormatError(f"{path}: {key} must be a non-empty string")
    for key in ("slots", "train_slots", "test_slots"):
        lists = d[key] if d[key] is not None else {}
        if not isinstance(lists, dict):
            raise TaskFormatError(f"{path}: {key} maps slot names to word lists")
        for name, words in lists.items():
            if not isinstance(words, list) or not words:
                raise TaskFormatError(f"{path}: {key}.{name} must be a non-empty list")
        d[key] = lists
    if set(d["train_slots"]) != set(d["test_slots"]) or not d["train_slots"]:
        raise TaskFormatError(f"{path}: train_slots and test_slots must name the same slots (at least one), "
                              f"got {sorted(d['train_slots'])} and {sorted(d['test_slots'])}")
    shared = set(d["slots"]) & set(d["train_slots"])
    if shared:
        raise TaskFormatError(f"{path}: slots {sorted(shared)} are both shared and per split")
    if "distinct" in d:
        _check_distinct(path, d)
    if not isinstance(d["wants"], list) or not d["wants"]:
        raise TaskFormatError(f"{path}: wants must be a non-empty list")
    for i, w in enumerate(d["wants"]):
        checks = [k for k in (w if isinstance(w, dict) else {}) if k not in WANT_OPTIONS]
        if len(checks) != 1 or checks[0] not in CHECKS:
            raise TaskFormatError(f"{path}: want {i} must be one of {sorted(CHECKS)} with complaints, got {w!r}")
        if not isinstance(w.get("instruction", ""), str):
            raise TaskFormatError(f"{path}: want {i} ({checks[0]}): instruction is a string, got {w['instruction']!r}")
        for option in ("gate", "not_in_request"):
            if not isinstance(w.get(option, False), bool):
                raise TaskFormatError(f"{path}: want {i} ({checks[0]}): {option} is true or false, got {w[option]!r}")
        if w.get("not_in_request") and checks[0] != "contains_any":
            raise TaskFormatError(f"{path}: want {i} ({checks[0]}): not_in_request applies to contains_any only")
        phrasings = w.get("complaints")
        if (not isinstance(phrasings, list) or len({str(p).strip() for p in phrasings}) < MIN_PHRASINGS
                or not all(isinstance(p, str) and p.strip() for p in phrasings)):
            raise TaskFormatError(f"{path}: want {i} ({checks[0]}) needs complaints: a list of at least "
                                  f"{MIN_PHRASINGS} different phrasings")


def _check_distinct(path: Path, d: dict) -> None:
    """The `distinct` slot: per split, with no entry twice, none in both splits, and at least as many
    entries as requests (each request of a split draws its own)."""
    slot = d["distinct"]
    if not isinstance(slot, str) or slot not in d["train_slots"]:
        raise TaskFormatError(f"{path}: distinct names a slot of train_slots and test_slots, got {slot!r}")
    keys = {}
    for split in SPLITS:
        entries = [json.dumps(e, sort_keys=True, ensure_ascii=False) for e in d[f"{split}_slots"][slot]]
        twice = sorted({e for e in entries if entries.count(e) > 1})
        if twice:
            raise TaskFormatError(f"{path}: {split}_slots.{slot} lists {twice[0]} twice")
        if d[f"n_{split}"] > len(entries):
            raise TaskFormatError(f"{path}: n_{split}={d[f'n_{split}']} but {split}_slots.{slot} has only "
                                  f"{len(entries)} entries: each {split} request draws a different {slot} "
                                  f"(distinct: {slot}), so add entries or lower n_{split}")
        keys[split] = set(entries)
    both = sorted(keys["train"] & keys["test"])
    if both:
        raise TaskFormatError(f"{path}: {slot} entries in both train_slots and test_slots: {len(both)} "
                              f"(e.g. {both[0]})")


def _generate(path: Path, d: dict, split: str) -> list[Task]:
    n = d[f"n_{split}"]
    rng = random.Random(f"{d['name']}:{d['version']}:{d['seed']}:{split}")  # str seeds are stable across runs
    lists = {**d["slots"], **d[f"{split}_slots"]}
    thanks = str(d.get("thanks") or THANKS).strip()
    distinct = d.get("distinct")
    # without replacement: request i asks the i-th entry of one shuffle (a file without `distinct`
    # draws every slot with replacement, and so generates what it always did)
    order = rng.sample(lists[distinct], len(lists[distinct])) if distinct else []
    seen: set[str] = set()
    tasks: list[Task] = []
    for _ in range(50 * n):  # distinct texts; a draw already seen is drawn again
        if len(tasks) == n:
            break
        template = rng.choice(d["templates"])
        values = {name: order[len(tasks)] if name == distinct else rng.choice(lists[name]) for name in sorted(lists)}
        text = " ".join(_fill(path, template, values).split())
        if text in seen:
            continue
        seen.add(text)
        task_id = f"{d['name']}-{split}-{len(tasks):03d}"
        wants = []
        for w in d["wants"]:
            check = next(k for k in w if k not in WANT_OPTIONS)
            complaint = _fill(path, rng.choice(w["complaints"]), values)
            value = _fill_value(path, w[check], values)
            if w.get("not_in_request"):
                value = _unsaid(path, task_id, value, text)
            wants.append(_want(path, {check: value, "complaint": complaint, "instruction": w.get("instruction", "")}))
        request = Request(text, tuple(wants), thanks, _fill(path, d["reference"], values).strip())
        unmet = request.first_unmet(request.reference)
        if unmet is not None:
            raise TaskFormatError(f"{path}: {task_id}'s reference misses the want {unmet.check} "
                                  f"({unmet.value!r}): {request.reference!r}")
        leaked = [w.complaint for w in wants if w.complaint.lower() in text.lower()]
        if leaked:
            raise TaskFormatError(f"{path}: {task_id}'s request says its own complaint {leaked[0]!r}")
        tasks.append(Task(task_id=task_id, env="chat", instruction=text, split=split,  # type: ignore[arg-type]
                          difficulty=str(d.get("difficulty", "medium")), tags=("chat", d["name"], "persona"),
                          path=path, data={"requests": (request,), "persona": d["name"], "grading": "first_reply",
                                           "gates": tuple(bool(w.get("gate")) for w in d["wants"])}))
    if len(tasks) < n:
        raise TaskFormatError(f"{path}: only {len(tasks)} different {split} requests for n_{split}={n}: "
                              f"add templates or words")
    return tasks


def digest(tasks: list[Task]) -> str:
    """sha256 (first 16 hex) of what a persona file generates: ids, texts, wants (with complaints and
    gates), references."""
    rows = [[t.task_id, r.text, [[w.check, w.value, w.complaint, g] for w, g in zip(r.wants, t.data["gates"])],
             r.reference] for t in tasks for r in t.data["requests"]]
    blob = json.dumps(rows, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def read_persona(path: Path) -> tuple[list[Task], str, str]:
    """A persona file's tasks (train then test), their digest and the digest the file records: every
    check but the digest's."""
    try:
        d = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{path}: invalid YAML: {e}") from e
    _check_shape(path, d)
    tasks = [t for split in SPLITS for t in _generate(path, d, split)]
    train = {t.instruction for t in tasks if t.split == "train"}
    both = sorted(t.instruction for t in tasks if t.split == "test" and t.instruction in train)
    if both:
        raise TaskFormatError(f"{path}: {len(both)} test requests are also train requests (e.g. {both[0]!r}): "
                              f"the test word lists must differ from the train ones")
    return tasks, digest(tasks), str(d["digest"]).strip()


def load_persona(path: Path) -> list[Task]:
    """A persona file's tasks (one request each; train then test), checked against its digest."""
    tasks, actual, recorded = read_persona(Path(path))
    if actual != recorded:
        raise TaskFormatError(f"{path}: the generated requests changed (digest {actual}, the file says "
                              f"{recorded}): a changed generator or word list makes a different suite, so "
                              f"bump `version` and set `digest` to what `python -m envs.chat.personas {path}` "
                              f"prints")
    return tasks


def available(root: Path = PERSONAS_DIR) -> list[str]:
    """The current personas (what `all` loads)."""
    return sorted(p.stem for p in Path(root).glob("*.yaml"))


def earlier(root: Path = PERSONAS_DIR) -> list[str]:
    """Earlier versions of the suites, kept to reproduce results measured on them: `v2/brief` ..."""
    return sorted(f"{p.parent.name}/{p.stem}" for p in Path(root).glob("v*/*.yaml"))


def load_personas(spec: str, split: str | None = None, root: Path = PERSONAS_DIR) -> list[Task]:
    """The tasks of the personas `spec` names: one name (`brief`, or `v2/brief` for an earlier version),
    a comma-separated list, or `all` (the current ones)."""
    names = available(root)
    wanted = names if spec.strip() == "all" else list(dict.fromkeys(n.strip() for n in spec.split(",") if n.strip()))
    unknown = [n for n in wanted if n not in names + earlier(root)]
    if unknown or not wanted:
        raise ConfigError(f"env.persona={spec}: unknown persona {', '.join(unknown) or repr(spec)}: "
                          f"choose from {', '.join(names)}, a comma-separated list of them, or all; "
                          f"earlier versions: {', '.join(earlier(root)) or 'none'}")
    tasks = [t for n in wanted for t in load_persona(Path(root) / f"{n}.yaml")]
    return [t for t in tasks if split in (None, "all") or t.split == split]


if __name__ == "__main__":  # print the digest each persona file generates (after changing one)
    files = sorted(PERSONAS_DIR.glob("*.yaml")) + sorted(PERSONAS_DIR.glob("v*/*.yaml"))
    for p in [Path(a) for a in sys.argv[1:]] or files:
        print(f"{p}: digest {read_persona(p)[1]}")
