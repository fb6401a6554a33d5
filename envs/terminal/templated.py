"""The `templated` terminal suite (`env=terminal env.suite=templated`): short shell tasks made from seeds.

A small model learns with RL only where reward is within reach, and it needs many distinct tasks to
learn a skill rather than a few answers. So each instance here is a one-to-three-command task (create,
edit, count, find, move, copy, chmod) with its own file names, words and numbers, generated in memory
from a seed: no directory per instance, no image per instance (everything runs in the shared image).

An instance is a `Task` whose `data` holds
- `files` / `modes`: what the harness writes into the workdir as root before the agent's first step
  (then the workdir is given to the agent's user, as the bundled tasks' `COPY --chown` does);
- `checks`: named bash predicates (exit 0 = holds), run by the harness as root from here, never from
  a file in the container, so the agent cannot edit its grader; the task is solved when all hold;
- `reference`: the oracle's commands, one per step.

Split: one stream of seeds (`templated_seed`, 0, 1, 2 ...) makes candidates, template by template in
turn; a candidate goes to test or train by a hash of its template and values, so a value set (and a
seed) is only ever in one split, and a candidate whose instruction was already made is skipped, so no
two instances read the same. Candidates are drawn until both splits are full: the first test instances
are the same whatever `templated_train` is.
"""
from __future__ import annotations

import hashlib
import json
import random
import shlex
from dataclasses import dataclass, field
from typing import Callable

from nextstate.types import Task

# No word is part of another, so `grep -c word` counts exactly the lines that hold that word.
WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "indigo", "juniper",
         "kelp", "lotus", "maple", "nectar", "onyx", "pepper", "quartz", "raven", "sage", "tundra",
         "umber", "violet", "willow", "yarrow", "zephyr", "basil", "comet", "dune", "falcon", "glacier",
         "hazel", "iris", "jasper", "lagoon", "meadow", "nimbus", "orchid", "pebble", "quill", "ridge")
KEYS = ("port", "host", "mode", "level", "user", "timeout", "retries", "color", "size", "limit")
EXTS = ("log", "csv", "md", "json", "conf", "dat")
TEST_SHARE = 3  # one value set in 3 is a test instance


@dataclass
class Spec:
    """One instance as a template writes it: paths are relative to the workdir."""

    instruction: str
    checks: list[tuple[str, str]]
    reference: list[str]
    files: dict[str, str] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)


# -- helpers the templates share ------------------------------------------------------------------
def _q(s: str) -> str:
    return shlex.quote(s)


def _words(rng: random.Random, k: int) -> list[str]:
    return rng.sample(WORDS, k)


def _text(rng: random.Random, n_lines: int, per_line: tuple[int, int] = (1, 5), pool=WORDS) -> str:
    return "".join(" ".join(rng.choices(pool, k=rng.randint(*per_line))) + "\n" for _ in range(n_lines))


def _is(path: str, content: str) -> str:
    """The file holds `content` (trailing newlines aside, as `$(...)` drops them)."""
    return f"[ \"$(cat {_q(path)})\" = {_q(content.rstrip(chr(10)))} ]"


def _number_in(path: str, n: int) -> str:
    """The file holds the number `n` (whitespace aside)."""
    return f"[ \"$(tr -d '[:space:]' < {_q(path)})\" = {n} ]"


def _conf(rng: random.Random) -> tuple[dict[str, str], str]:
    keys = rng.sample(KEYS, rng.randint(3, 5))
    values = {k: rng.choice([str(rng.randint(1, 999)), rng.choice(WORDS)]) for k in keys}
    return values, "".join(f"{k}={v}\n" for k, v in values.items())


def _new_value(rng: random.Random, old: str) -> str:
    while (new := rng.choice([str(rng.randint(1, 999)), rng.choice(WORDS)])) == old:
        pass
    return new


# -- templates: each draws its values from `rng` and returns a Spec ---------------------------------
def create_file(rng):
    name, a, b = _words(rng, 3)
    line, path = f"{a} {b} {rng.randint(1, 99)}", f"{name}.txt"
    return Spec(f"Create the file {path} containing exactly the line: {line}",
                [("content", _is(path, line))], [f"echo {_q(line)} > {path}"])


def append_line(rng):
    name, a = _words(rng, 2)
    path, body = f"{name}.txt", _text(rng, rng.randint(2, 6))
    line = f"{a} {rng.randint(1, 99)}"
    return Spec(f"Append the line \"{line}\" to the end of {path}.",
                [("content", _is(path, body + line))], [f"echo {_q(line)} >> {path}"], files={path: body})


def replace_value(rng):
    name = rng.choice(WORDS)
    values, body = _conf(rng)
    key = rng.choice(list(values))
    old, new = values[key], _new_value(rng, values[key])
    path = f"{name}.conf"
    return Spec(f"In {path}, change the line {key}={old} to {key}={new}.",
                [("content", _is(path, body.replace(f"{key}={old}\n", f"{key}={new}\n")))],
                [f"sed -i 's/^{key}={old}$/{key}={new}/' {path}"], files={path: body})


def _count(what: str, command: str, counter: Callable[[str], int], per_line: tuple[int, int]):
    def template(rng):
        src, out = _words(rng, 2)
        path, body = f"{src}.txt", _text(rng, rng.randint(4, 40), per_line)
        return Spec(f"Write the number of {what} in {path} to {out}.txt.",
                    [("number", _number_in(f"{out}.txt", counter(body)))],
                    [f"{command} < {path} > {out}.txt"], files={path: body})
    return template


count_lines = _count("lines", "wc -l", lambda s: s.count("\n"), (1, 5))
count_words = _count("words", "wc -w", lambda s: len(s.split()), (1, 5))


def count_matches(rng):
    src, out = _words(rng, 2)
    pool = _words(rng, 5)
    word, path = pool[0], f"{src}.log"
    lines = [f"{rng.choice(['INFO', 'WARN', 'ERROR'])} " + " ".join(rng.choices(pool, k=rng.randint(1, 3)))
             for _ in range(rng.randint(5, 30))]
    lines[rng.randrange(len(lines))] += f" {word}"  # at least one match: grep -c exits 0
    n = sum(word in line for line in lines)
    return Spec(f"Write the number of lines in {path} that contain {word} to {out}.txt.",
                [("number", _number_in(f"{out}.txt", n))], [f"grep -c {word} {path} > {out}.txt"],
                files={path: "\n".join(lines) + "\n"})


def find_ext(rng):
    top, sub1, sub2, out = _words(rng, 4)
    ext, other = rng.sample(EXTS, 2)
    files, wanted = {f"{rng.choice(WORDS)}.{ext}": "outside\n"}, []  # one outside `top`: not listed
    for d in (top, f"{top}/{sub1}", f"{top}/{sub2}"):
        for w in rng.sample(WORDS, rng.randint(1, 3)):
            e = rng.choice((ext, other))
            files[f"{d}/{w}.{e}"] = f"{w}\n"
            if e == ext:
                wanted.append(f"{d}/{w}.{e}")
    if not wanted:
        files[f"{top}/{sub1}/{out}.{ext}"] = "x\n"
        wanted.append(f"{top}/{sub1}/{out}.{ext}")
    listing = "\n".join(sorted(wanted))
    norm = f"sed -e 's#^/app/##' -e 's#^\\./##' {out}.txt | sort"
    return Spec(f"Write the paths of all .{ext} files under {top}/ to {out}.txt, one per line.",
                [("listing", f"[ \"$({norm})\" = {_q(listing)} ]")],
                [f"find {top} -name '*.{ext}' > {out}.txt"], files=files)


def rename_file(rng):
    old, new = _words(rng, 2)
    ext = rng.choice(EXTS)
    body = _text(rng, rng.randint(1, 4))
    src, dst = f"{old}.{ext}", f"{new}.{ext}"
    return Spec(f"Rename {src} to {dst}.", [("gone", f"[ ! -e {src} ]"), ("moved", _is(dst, body))],
                [f"mv {src} {dst}"], files={src: body})


def copy_file(rng):
    name, dest = _words(rng, 2)
    ext = rng.choice(EXTS)
    body, src = _text(rng, rng.randint(1, 4)), f"{name}.{ext}"
    return Spec(f"Copy {src} to {dest}/{src}; the directory {dest} already exists.",
                [("kept", _is(src, body)), ("copied", _is(f"{dest}/{src}", body))],
                [f"cp {src} {dest}/"], files={src: body, f"{dest}/.keep": ""})


def move_into_dir(rng):
    name, d = _words(rng, 2)
    ext = rng.choice(EXTS)
    body, src = _text(rng, rng.randint(1, 4)), f"{name}.{ext}"
    return Spec(f"Create the directory {d} and move {src} into it.",
                [("dir", f"[ -d {d} ]"), ("moved", _is(f"{d}/{src}", body)), ("gone", f"[ ! -e {src} ]")],
                [f"mkdir {d}", f"mv {src} {d}/"], files={src: body})


def make_tree(rng):
    top, a, b = _words(rng, 3)
    return Spec(f"Create the directories {top}/{a} and {top}/{b}.",
                [(a, f"[ -d {top}/{a} ]"), (b, f"[ -d {top}/{b} ]")], [f"mkdir -p {top}/{a} {top}/{b}"])


def chmod_file(rng):
    name = rng.choice(WORDS)
    if rng.random() < 0.5:
        path, body, mode = f"{name}.sh", f"#!/bin/sh\necho {name}\n", rng.choice(["755", "700", "750", "555", "744"])
    else:
        path, body, mode = f"{name}.{rng.choice(EXTS)}", f"{name}\n", rng.choice(["600", "640", "400", "444", "660"])
    return Spec(f"Set the permissions of {path} to {mode}.", [("mode", f"[ \"$(stat -c %a {path})\" = {mode} ]")],
                [f"chmod {mode} {path}"], files={path: body}, modes={path: "644"})


def backup_then_edit(rng):
    name = rng.choice(WORDS)
    values, body = _conf(rng)
    key = rng.choice(list(values))
    old, new = values[key], _new_value(rng, values[key])
    path = f"{name}.conf"
    return Spec(f"Copy {path} to {path}.bak, then in {path} change {key}={old} to {key}={new}.",
                [("backup", _is(f"{path}.bak", body)),
                 ("edited", _is(path, body.replace(f"{key}={old}\n", f"{key}={new}\n")))],
                [f"cp {path} {path}.bak", f"sed -i 's/^{key}={old}$/{key}={new}/' {path}"], files={path: body})


def gather_by_ext(rng):
    d, out = _words(rng, 2)
    ext, other = rng.sample(EXTS, 2)
    names = _words(rng, rng.randint(3, 6))
    k = rng.randint(2, len(names) - 1)
    moved = [f"{w}.{ext}" for w in names[:k]]
    files = {**{p: f"{p}\n" for p in moved}, **{f"{w}.{other}": f"{w}\n" for w in names[k:]}}
    return Spec(f"Make a directory {d}, move every .{ext} file into it, and write how many you moved to {out}.txt.",
                [("dir", f"[ -d {d} ]"), ("none_left", f"[ -z \"$(find . -maxdepth 1 -name '*.{ext}')\" ]"),
                 ("moved", " && ".join(f"[ -f {d}/{p} ]" for p in moved)),
                 ("count", _number_in(f"{out}.txt", k))],
                [f"mkdir {d}", f"mv *.{ext} {d}/", f"ls {d} | wc -l > {out}.txt"], files=files)


TEMPLATES: dict[str, Callable[[random.Random], Spec]] = {
    "create-file": create_file, "append-line": append_line, "replace-value": replace_value,
    "count-lines": count_lines, "count-words": count_words, "count-matches": count_matches,
    "find-ext": find_ext, "rename-file": rename_file, "copy-file": copy_file, "move-into-dir": move_into_dir,
    "make-tree": make_tree, "chmod-file": chmod_file, "backup-then-edit": backup_then_edit,
    "gather-by-ext": gather_by_ext,
}


# -- the suite ------------------------------------------------------------------------------------
def _digest(*parts) -> int:
    return int(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16], 16)


def instance(template: str, seed: int) -> Task:
    """The instance of `template` that `seed` makes; its split follows from its values."""
    spec = TEMPLATES[template](random.Random(seed))
    values = [template, spec.instruction, spec.files, spec.modes]
    split = "test" if _digest(*values) % TEST_SHARE == 0 else "train"
    return Task(task_id=f"{template}-{seed:08x}", env="terminal", instruction=spec.instruction, split=split,
                difficulty="easy", tags=("templated", template),
                data={"format": "templated", "template": template, "seed": seed, "split_declared": True,
                      "files": spec.files, "modes": spec.modes, "checks": tuple(spec.checks),
                      "reference": tuple(spec.reference), "agent_timeout_s": 120.0, "test_timeout_s": 30.0})


def generate(n_train: int, n_test: int, seed: int = 0, split: str | None = None) -> list[Task]:
    """`n_train` train and `n_test` test instances (both with split None or "all"), distinct
    instructions, deterministic in (`seed`, the counts)."""
    names = list(TEMPLATES)
    want = {"train": n_train, "test": n_test}
    made: dict[str, list[Task]] = {"train": [], "test": []}
    seen: set[str] = set()
    i = 0
    while any(len(made[s]) < want[s] for s in made):
        if i > 50 * (n_train + n_test) + 1000:
            raise ValueError(f"templated suite: only {len(made['train'])} train and {len(made['test'])} test "
                             f"distinct instances could be made (asked {n_train} and {n_test})")
        task = instance(names[i % len(names)], _digest(seed, i) % (1 << 32))
        i += 1
        if task.instruction in seen or len(made[task.split]) >= want[task.split]:
            continue
        seen.add(task.instruction)
        made[task.split].append(task)
    if split in (None, "all"):
        return made["train"] + made["test"]
    if split not in made:
        raise ValueError(f"the templated suite has splits train and test, not {split!r}")
    return made[split]


def setup_script(task: Task, user: str) -> str:
    """The root shell script that lays out the task's files in the workdir (the cwd it runs in) and
    gives them to the agent's user."""
    lines = ["set -e"]
    for path, content in task.data["files"].items():
        parent = path.rpartition("/")[0]
        if parent:
            lines.append(f"mkdir -p {_q(parent)}")
        lines.append(f"printf '%s' {_q(content)} > {_q(path)}")
    lines += [f"chmod {mode} {_q(path)}" for path, mode in task.data["modes"].items()]
    lines.append(f"chown -R {_q(user)}: .")
    return "\n".join(lines)


def check_script(task: Task) -> str:
    """One line of 0/1, one digit per check, in order: every check in one exec. A check that hangs
    (a FIFO the agent left where a file was asked for) is killed and counts as failed."""
    parts = [f"if timeout -s KILL 5 bash -c {_q(pred)} >/dev/null 2>&1 </dev/null; then printf 1; else printf 0; fi"
             for _, pred in task.data["checks"]]
    return "\n".join(["exec 2>/dev/null", *parts])  # (bash's note on a killed check is not a digit)


def reference_replies(task: Task, done_token: str) -> list[str]:
    return [f"```bash\n{cmd}\n```" for cmd in task.data["reference"]] + [done_token]
