"""`python -m envs.swe.validate [INSTANCES] [--write]`: run each instance's tests without a fix and
with its gold patch, as SWE-bench validates its instances, and compare FAIL_TO_PASS (fails before,
passes after) and PASS_TO_PASS (passes both times) with what the file says. `--write` records the
derived lists (a JSONL file only): the way to finish an instance you have just added."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile

from envs.sandbox import SandboxConfig, wait_for_background_removals
from envs.swe.env import SWEEnv, SWEEnvConfig, _resolve
from envs.swe.grading import grade_patch
from nextstate.config import conf_defaults

_PASSING = ("PASSED", "XFAIL")


def status_map(test_output: str, instance: dict) -> dict[str, str] | None:
    from swebench.harness.grading import get_logs_eval
    from swebench.harness.utils import make_test_spec

    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(test_output)
        f.flush()
        sm, found = get_logs_eval(make_test_spec(instance), f.name)
    return sm if found else None


def derive(env: SWEEnv, task) -> tuple[list[str], list[str]] | str:
    """(F2P, P2P) from two runs, or what went wrong."""
    inst, maps = task.data["instance"], {}
    for name, patch in (("before", ""), ("after", inst["patch"])):
        res = grade_patch(env.image_for(task), inst, patch, sandbox=env.sandbox_config, run_id="swe-validate",
                          client=env._docker(), timeout_s=env.config.eval_timeout_s)
        if res.infra_failure:
            return f"infrastructure failure: {res.infra_reason}"
        maps[name] = status_map(res.test_output, inst)
        if maps[name] is None:
            log = (res.apply_output + res.test_output)[-1500:]
            return f"no parseable test output {name} the gold patch:\n{log}"
    before, after = maps["before"], maps["after"]
    f2p = [t for t, s in after.items() if s in _PASSING and before.get(t) not in _PASSING]
    p2p = [t for t, s in after.items() if s in _PASSING and before.get(t) in _PASSING]
    return f2p, p2p


def main(argv: list[str] | None = None) -> int:
    env_cfg = conf_defaults("env", "swe", SWEEnvConfig)
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("instances", nargs="?", default=env_cfg.instances)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    source = _resolve(args.instances)
    sandbox = conf_defaults("sandbox", "default", SandboxConfig)
    env = SWEEnv(dataclasses.replace(env_cfg, instances=str(source)), sandbox, split="all", run_id="swe-validate")
    derived, bad = {}, 0
    for task in env.tasks:
        out = derive(env, task)
        if isinstance(out, str):
            bad += 1
            print(f"{task.task_id}: {out}")
            continue
        derived[task.task_id] = out
        inst = task.data["instance"]
        same = sorted(out[0]) == sorted(inst["FAIL_TO_PASS"]) and sorted(out[1]) == sorted(inst["PASS_TO_PASS"])
        bad += not same and not args.write
        recorded = f"  (the file says F2P {len(inst['FAIL_TO_PASS'])} P2P {len(inst['PASS_TO_PASS'])})"
        print(f"{task.task_id}: F2P {len(out[0])} P2P {len(out[1])}{'' if same else recorded}")
    env.close()
    wait_for_background_removals()
    if args.write and source.suffix == ".jsonl":
        rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
        for row in rows:
            if row["instance_id"] in derived:
                row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = derived[row["instance_id"]]
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(f"wrote {source}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
