"""SWE env pieces that need no Docker: the reply convention, the oracle's replies, splitting test
files out of a patch, the instance loaders (JSON / JSONL / parquet / task repo), the legacy-builder
rewrite of BuildKit heredocs, and the bundled suite's own consistency."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from envs.swe.actions import Replace, Shell, Write, parse_reply, render_replace, render_shell, render_write
from envs.swe.grading import apply_script, is_test_file, split_patch
from envs.swe.images import legacy_dockerfile
from envs.swe.instances import SWEInstanceError, load_swe_suite, read_instances
from envs.swe.oracle import reference_replies
from tests.paths import ROOT

SUITE = ROOT / "envs" / "tasks" / "swe" / "instances.jsonl"
RAW = [json.loads(line) for line in SUITE.read_text().splitlines()]


# -- the reply convention ---------------------------------------------------------------------------
def test_blocks_run_in_order_and_submit_comes_last():
    reply = ("Let me look first.\n```bash\nls\n```\n"
             "```edit pkg/mod.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n"
             "```write pkg/new.py\nprint('hi')\n```\nSUBMIT\n")
    p = parse_reply(reply)
    assert p.error is None and p.submit
    assert p.ops == (Shell("ls"), Replace("pkg/mod.py", (("x = 1\n", "x = 2\n"),)),
                     Write("pkg/new.py", "print('hi')\n"))


def test_several_search_replace_pairs_and_empty_replace():
    body = ("<<<<<<< SEARCH\na\nb\n=======\nc\n>>>>>>> REPLACE\n\n"
            "<<<<<<< SEARCH\nd\n=======\n>>>>>>> REPLACE\n")
    p = parse_reply(f"```edit f.py\n{body}```")
    assert p.ops == (Replace("f.py", (("a\nb\n", "c\n"), ("d\n", ""))),)


@pytest.mark.parametrize("reply", ["SUBMIT", "All done.\nDONE", "```bash\ntrue\n```\nSUBMIT."])
def test_submit_tokens(reply):
    assert parse_reply(reply).submit


def test_submit_inside_a_block_is_a_command():
    p = parse_reply("```bash\necho SUBMIT\n```")
    assert not p.submit and p.ops == (Shell("echo SUBMIT"),)


def test_longer_fences_carry_backticks():
    content = "Docs\n```python\nprint(1)\n```\n"
    reply = render_write("README.md", content)
    assert reply.startswith("````write") and parse_reply(reply).ops == (Write("README.md", content),)


def test_render_parse_roundtrip():
    pairs = [("def f():\n    return 1\n", "def f():\n    return 2\n"), ("y = 0\n", "")]
    assert parse_reply(render_replace("a/b.py", pairs)).ops == (Replace("a/b.py", tuple(pairs)),)
    assert parse_reply(render_shell("cd /x && ls")).ops == (Shell("cd /x && ls"),)


def test_prose_blocks_are_noted_not_run():
    p = parse_reply("```python\nimport os\n```\n```bash\nls\n```")
    assert p.ops == (Shell("ls"),) and "not run" in p.notes[0]


MALFORMED = {  # reply -> what the error says
    '': 'empty',
    '\x00\x01binary\x02\x03': 'not readable',
    'I think the bug is in slug.py\nbut I am not sure': 'no action found',
    '```python\nprint(1)\n```': 'no action found',
    '```bash\nls\n': 'never closed',
    '```edit\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```': 'needs a path',
    '```edit f.py\nold\nnew\n```': 'expected a line',
    '```edit f.py\n<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n```': 'lacks',
    '```edit f.py\n<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE\n```': 'empty',
}


@pytest.mark.parametrize("reply,reason", MALFORMED.items())
def test_malformed_replies_are_explained(reply, reason):
    p = parse_reply(reply)
    assert p.error and reason in p.error and not p.ops and not p.submit


def test_a_single_bare_line_is_a_command():
    assert parse_reply("git status").ops == (Shell("git status"),)


# -- the oracle ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", RAW, ids=lambda r: r["instance_id"])
def test_oracle_replays_every_gold_patch_as_edits(raw):
    replies = reference_replies(raw["patch"])
    assert replies[-1] == "SUBMIT"
    ops = [op for r in replies[:-1] for op in parse_reply(r).ops]
    assert ops and all(isinstance(op, (Replace, Write)) for op in ops)  # no git-apply fallback
    changed = set(re.findall(r"^\+\+\+ b/(.*)$", raw["patch"], re.M))
    assert {op.path for op in ops} == changed


def test_oracle_falls_back_to_git_apply_and_empty_patch_just_submits():
    patch = RAW[0]["patch"]
    replies = reference_replies(patch, mode="git_apply")
    assert len(replies) == 2 and "git apply" in parse_reply(replies[0]).ops[0].command
    assert reference_replies("") == ["SUBMIT"]


# -- what is graded -----------------------------------------------------------------------------------
def test_split_patch_drops_test_files_by_swebench_rule():
    patch = "".join(f"diff --git a/{p} b/{p}\n--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n"
                    for p in ["pkg/core.py", "tests/test_core.py", "conftest.py", "pkg/testing.py", "setup.py"])
    kept, dropped = split_patch(patch)
    assert dropped == ["tests/test_core.py", "conftest.py", "pkg/testing.py"]
    assert "pkg/core.py" in kept and "setup.py" in kept and "conftest" not in kept
    assert is_test_file("e2e/run.py") and not is_test_file("src/lib.py")


def test_apply_script_is_swebenchs_chain():
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    script = apply_script()
    for cmd in GIT_APPLY_CMDS:
        assert f"{cmd} /tmp/patch.diff" in script
    assert "git apply --check --reverse" in script


# -- loading instances --------------------------------------------------------------------------------
def test_bundled_suite_is_complete():
    tasks = load_swe_suite(SUITE)
    assert len(tasks) >= 10 and len({t.task_id for t in tasks}) == len(tasks)
    assert {t.split for t in tasks} == {"train", "test"}
    for t in tasks:
        inst = t.data["instance"]
        assert inst["FAIL_TO_PASS"] and inst["PASS_TO_PASS"], t.task_id
        assert not set(inst["FAIL_TO_PASS"]) & set(inst["PASS_TO_PASS"])
        assert t.data["build"]["kind"] == "bundle" and Path(t.data["build"]["bundle"]).is_file()
        assert inst["image"] == f"swebench/sweb.eval.x86_64.{t.task_id.replace('__', '_1776_')}:latest"
        assert ">>>>> Start Test Output" in inst["eval_script"] and inst["base_commit"] in inst["eval_script"]


def test_bundles_hold_no_commit_after_base(tmp_path):
    """The fix must not be recoverable from the image: each bundle ends at its base commit."""
    for raw in RAW:
        out = subprocess.run(["git", "bundle", "list-heads", str(SUITE.parent / raw["repo_bundle"])],
                             capture_output=True, text=True, check=True).stdout
        assert {line.split()[0] for line in out.splitlines()} == {raw["base_commit"]}


def test_json_jsonl_and_parquet_load_alike(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # exports store F2P/P2P as JSON strings; our loader turns them into lists
    rows = [dict(r, FAIL_TO_PASS=json.dumps(r["FAIL_TO_PASS"]), PASS_TO_PASS=json.dumps(r["PASS_TO_PASS"]),
                 repo_bundle=str(SUITE.parent / r["repo_bundle"])) for r in RAW]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    want = [(t.task_id, t.split, t.data["instance"]["FAIL_TO_PASS"]) for t in load_swe_suite(SUITE)]
    for name in ("a.json", "a.jsonl", "a.parquet"):
        got = [(t.task_id, t.split, t.data["instance"]["FAIL_TO_PASS"])
               for t in load_swe_suite(tmp_path / name)]
        assert got == want, name
    assert [t.task_id for t in load_swe_suite(tmp_path / "a.jsonl", split="test")] == \
           [r["instance_id"] for r in RAW if r["split"] == "test"]


def test_swebench_task_repo_loads_with_swebenchs_reader(tmp_path):
    raw = RAW[0]
    d = tmp_path / "tasks" / raw["instance_id"]
    d.mkdir(parents=True)
    (tmp_path / "sweb.yaml").write_text("datasets: [mine]\nsplits: [test]\n")
    meta = {k: raw[k] for k in ("instance_id", "repo", "version", "base_commit", "image", "log_parser",
                                "eval_type", "created_at", "environment_setup_commit")}
    import yaml

    (d / "task.yaml").write_text(yaml.safe_dump(dict(meta, split="test", datasets=["mine"])))
    (d / "tests.json").write_text(json.dumps({k: raw[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}))
    for key, name in (("patch", "gold.patch"), ("test_patch", "test.patch"), ("eval_script", "eval.sh"),
                      ("problem_statement", "problem_statement.md")):
        (d / name).write_text(raw[key])
    (d / "Dockerfile").write_text("FROM nextstate/swe:latest\n")
    (task,) = load_swe_suite(tmp_path)
    assert task.task_id == raw["instance_id"] and task.split == "test"
    assert task.data["instance"]["patch"] == raw["patch"]
    assert task.data["build"] == {"kind": "dockerfile", "context": str(d), "dockerfile": "Dockerfile"}


def test_missing_grading_fields_are_named(tmp_path):
    old_style = {k: v for k, v in RAW[0].items() if k not in ("eval_script", "log_parser")}
    (tmp_path / "old.jsonl").write_text(json.dumps(old_style) + "\n")
    with pytest.raises(SWEInstanceError, match="eval_script, log_parser"):
        load_swe_suite(tmp_path / "old.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(SWEInstanceError, match="expected .json"):
        read_instances(tmp_path / "x.csv")
    (tmp_path / "dup.jsonl").write_text((json.dumps(dict(RAW[0], repo_bundle=None)) + "\n") * 2)
    with pytest.raises(SWEInstanceError, match="duplicate"):
        load_swe_suite(tmp_path / "dup.jsonl")


# -- images -------------------------------------------------------------------------------------------
def test_heredocs_become_files_for_the_legacy_builder(tmp_path):
    text = ("FROM base\nRUN <<EOF_1a2b\n#!/bin/bash\nset -euxo pipefail\necho hi > /x\nEOF_1a2b\n"
            "COPY <<'CONF' /etc/app.conf\nkey=value\nCONF\nRUN echo done\n")
    out = legacy_dockerfile(text, tmp_path)
    assert "<<" not in out and "RUN echo done" in out
    assert "COPY nextstate-heredoc-1 /tmp/nextstate-heredoc-1" in out
    assert "RUN /bin/bash /tmp/nextstate-heredoc-1 && rm -f /tmp/nextstate-heredoc-1" in out
    assert "COPY nextstate-heredoc-2 /etc/app.conf" in out
    assert (tmp_path / "nextstate-heredoc-1").read_text().startswith("#!/bin/bash\nset -euxo")
    assert (tmp_path / "nextstate-heredoc-2").read_text() == "key=value\n"
