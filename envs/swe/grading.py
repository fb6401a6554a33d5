"""Grading a SWE patch the way swebench 5.x does, in a fresh container, and fast.

What is swebench's, imported rather than rewritten: the instance's `TestSpec` (`make_test_spec`,
which also makes the eval script record the test command's exit code), the chain of patch-apply
commands (`GIT_APPLY_CMDS`), the log parsers and the FAIL_TO_PASS / PASS_TO_PASS rules
(`get_eval_report`). What is ours: the container's lifecycle. swebench runs `tail -f /dev/null`
as pid 1 and stops it with `docker stop --time=15`, which waits the full 15 s because that pid 1
ignores SIGTERM; our sandboxes run docker-init as pid 1 with SIGKILL as the stop signal and are
removed in the background.

The agent never grades itself: the patch is the diff it left in its own container, minus its
changes to test files (swebench's rule for telling tests from source: `is_test_file`), applied to a
new container from the instance's image; then the eval script checks out the original test files
and applies `test_patch` before it runs them.
"""
from __future__ import annotations

import dataclasses
import re
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.sandbox import Sandbox, SandboxConfig, SandboxError

PATCH_FILE = "/tmp/patch.diff"  # swebench.harness.constants.CONTAINER_PATCH_FILE
EVAL_FILE = "/eval.sh"
_FILE_HEADER = re.compile(r"^diff --git a/(.*?) b/(.*)$")
# swebench.collect.utils.extract_patches: a file whose path contains one of these words is a test
# file (it goes to test_patch, not patch). The same rule decides which of the agent's changes are
# dropped before grading, so a changed conftest.py or test never reaches the graded tree.
TEST_WORDS = ("test", "tests", "e2e", "testing")


# Files that are not tests by that rule, yet decide how the tests run: pytest's configuration
# (`addopts = -p <plugin>` loads any module as a plugin, which can report every test as passed)
# and the modules and .pth files Python runs at startup. A patch's changes to them are dropped too.
RUN_CONFIG_FILES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg",
                              "pyproject.toml", "sitecustomize.py", "usercustomize.py"})


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (any(word in path for word in TEST_WORDS) or name in RUN_CONFIG_FILES
            or name.endswith(".pth"))


def split_patch(patch: str) -> tuple[str, list[str]]:
    """(the patch without its test-file sections, the test files it touched)."""
    kept, dropped, keep = [], [], True
    for line in patch.splitlines(keepends=True):
        m = _FILE_HEADER.match(line)
        if m:
            paths = {m.group(1), m.group(2)}
            keep = not any(is_test_file(p) for p in paths)
            if not keep:
                dropped.append(m.group(2))
        if keep:
            kept.append(line)
    return "".join(kept), dropped


def apply_script(patch_file: str = PATCH_FILE) -> str:
    """swebench's patch-apply chain as one shell script (run_evaluation.run_instance runs the
    same commands one exec at a time): each fallback starts from a pristine tree, and a patch that
    turns out to be applied already counts as applied. Exits 1 when nothing applied."""
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    lines = ["ok=0"]
    for i, cmd in enumerate(GIT_APPLY_CMDS):
        reset = "git checkout -- . ; git clean -fd ; " if i else ""
        lines.append(f"if [ $ok = 0 ]; then {reset}{cmd} {patch_file} && ok=1; fi")
    lines.append(f"if [ $ok = 0 ]; then git apply --check --reverse {patch_file} && ok=1; fi")
    lines.append('if [ $ok = 0 ]; then echo ">>>>> Patch Apply Failed"; exit 1; fi')
    return "\n".join(lines)


def grading_script(with_patch: bool, marker: str) -> str:
    """Apply (when there is a patch), then the eval script, in one exec: the apply output comes
    before a marker line, the eval script's output (the log swebench parses) after it.

    Everything goes to one pipe (`exec 2>&1`): stdout and stderr reach us in no fixed order, and
    `set -x` prints the eval script's start/end markers on stderr, so with two pipes a loaded
    machine can put test results outside the part swebench parses (or before our marker)."""
    head = f"cd /testbed\n{apply_script()}\n" if with_patch else ""
    return f"exec 2>&1\n{head}echo {marker}\nexec /bin/bash {EVAL_FILE}\n"


@dataclass
class GradeResult:
    """swebench's report fields for one instance, plus how the grading itself went."""

    instance_id: str
    resolved: bool = False
    patch_exists: bool = False
    patch_successfully_applied: bool = False
    tests_status: dict[str, Any] | None = None
    report: dict[str, Any] = field(default_factory=dict)  # swebench's per-instance report
    apply_output: str = ""
    test_output: str = ""
    tests_timed_out: bool = False
    retried: bool = False  # the first run's log stopped early (see _run_in_fresh_container)
    infra_failure: bool = False  # Docker trouble: never a verdict on the patch
    infra_reason: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _run_in_fresh_container(image, cfg, files, with_patch, spec, run_id, client, timeout_s):
    """(exit code, (apply output, marker, eval output), complete, seconds). The log is complete
    when the patch did not apply, the tests timed out, or the eval script got to its last lines
    (the test exit code swebench's TestSpec makes it print). An incomplete one means the tests
    were cut short: by the patch itself, or by the container dying, which then becomes a
    SandboxError (an infra failure, never a verdict)."""
    from swebench.harness.constants import TEST_EXIT_CODE

    with Sandbox(image, cfg, run_id=run_id, client=client, user="root", shell=False) as sb:
        sb.upload_files(files)
        marker = f"__NEXTSTATE_EVAL_{secrets.token_hex(8)}__"
        t = time.monotonic()
        code, out = sb.run(grading_script(with_patch, marker), timeout=timeout_s)
        seconds = time.monotonic() - t
        parts = out.partition(marker + "\n")
        complete = (not parts[1] or (code == 137 and seconds >= timeout_s)
                    or TEST_EXIT_CODE not in spec.eval_script or TEST_EXIT_CODE in parts[2])
        if not complete:  # `true` fails only where the container is gone (or going)
            alive, why = sb.run("true", timeout=30)
            if alive != 0:
                raise SandboxError(f"the grading container died during the tests: {why.strip()[:300]}")
    return code, parts, complete, seconds


def grade_patch(image: str, instance: dict[str, Any], patch: str, *, sandbox: SandboxConfig,
                run_id: str, client=None, timeout_s: float = 1800.0) -> GradeResult:
    """Apply `patch` to a fresh container of `image`, run the instance's eval script, and let
    swebench decide. An empty patch is never resolved (swebench does not even run it); we still
    run the tests, so that its report says which tests fail without a fix."""
    from swebench.harness.grading import get_eval_report
    from swebench.harness.utils import make_test_spec

    t0 = time.monotonic()
    spec = make_test_spec(instance)
    res = GradeResult(instance_id=spec.instance_id, patch_exists=bool(patch.strip()))
    cfg = dataclasses.replace(sandbox, workdir="/testbed", user="root", async_remove=True)
    files = {EVAL_FILE: spec.eval_script.encode()}
    if res.patch_exists:
        files[PATCH_FILE] = patch.encode()
    try:
        for _attempt in (1, 2):
            code, out, complete, t_run = _run_in_fresh_container(image, cfg, files, res.patch_exists, spec,
                                                                 run_id, client, timeout_s)
            if complete:
                break
            res.retried = True  # the log stops early in a live container: once more, from scratch
    except SandboxError as e:
        res.infra_failure, res.infra_reason = True, str(e)
        res.seconds = time.monotonic() - t0
        return res
    res.apply_output, started, out = out
    if not started:  # swebench: an EvaluationError, so no report and not resolved
        res.seconds = time.monotonic() - t0
        return res
    if code == 137 and t_run >= timeout_s:  # `timeout -s KILL` cut the tests
        res.tests_timed_out = True
        out += f"\n\nTimeout error: {timeout_s:g} seconds exceeded."  # as swebench logs it
    res.test_output = out
    with tempfile.TemporaryDirectory(prefix="nextstate-grade-") as tmp:
        log = Path(tmp) / "test_output.txt"
        log.write_text(out)
        report = get_eval_report(spec, {"instance_id": spec.instance_id, "model_patch": patch,
                                        "model_name_or_path": "nextstate"}, str(log),
                                 include_tests_status=True)[spec.instance_id]
    res.report = report
    res.patch_successfully_applied = bool(report.get("patch_successfully_applied")) and res.patch_exists
    res.tests_status = report.get("tests_status")
    res.resolved = bool(report.get("resolved")) and res.patch_exists and not res.tests_timed_out
    res.seconds = time.monotonic() - t0
    return res
