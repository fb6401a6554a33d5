"""Persistent shell vs one `docker exec` per command, on the same container in one run; the terminal
env's reset time; and what the grader's closure costs (recorded once per task and image, checked at
every grading). Prints ratios and ends with one JSON line (the headline: the speed-up)."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.sandbox import Sandbox, SandboxConfig, docker_client, wait_for_background_removals  # noqa: E402
from envs.sandbox.images import ensure_shared_image  # noqa: E402
from envs.terminal.env import TerminalEnv, TerminalEnvConfig  # noqa: E402
from nextstate.config import compose, typed  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(n_cmds: int = 300, n_resets: int = 20) -> None:
    cfg = compose(["env=terminal"])
    sb_cfg = typed(cfg.sandbox, SandboxConfig)
    env_cfg = typed(cfg.env, TerminalEnvConfig)
    client = docker_client()
    image = ensure_shared_image(client, env_cfg.shared_image, env_cfg.base_image)
    with Sandbox(image, sb_cfg, run_id="bench-sandbox", client=client) as sb:
        container = client.containers.get(sb.container_id)
        shell, execs = [], []
        for i in range(n_cmds):  # interleaved so that machine noise hits both alike
            t = time.perf_counter()
            sb.exec(f"echo {i}")
            shell.append(time.perf_counter() - t)
            if i % 3 == 0:
                t = time.perf_counter()
                container.exec_run(["bash", "-c", f"echo {i}"])
                execs.append(time.perf_counter() - t)
    env = TerminalEnv(env_cfg, sb_cfg, run_id="bench-reset")
    task = env.tasks[0]
    env.prepare([task])
    resets = []
    for _ in range(n_resets):
        t = time.perf_counter()
        env.reset(options={"task_id": task.task_id})
        resets.append(time.perf_counter() - t)
    closure_s, check_ms, n_files, n_dirs = grader_closure_cost(env, task)
    env.close()
    wait_for_background_removals()
    s50, s95, e50, e95 = pct(shell, .5), pct(shell, .95), pct(execs, .5), pct(execs, .95)
    speedup = e50 / s50
    print(f"persistent shell  p50 {s50 * 1e3:7.2f} ms  p95 {s95 * 1e3:7.2f} ms  ({len(shell)} commands)")
    print(f"exec_run          p50 {e50 * 1e3:7.2f} ms  p95 {e95 * 1e3:7.2f} ms  ({len(execs)} commands)")
    print(f"speed-up p50 {speedup:.1f}x (target >= 15x), p95 {e95 / s95:.1f}x")
    print(f"env reset         p50 {statistics.median(resets) * 1e3:7.1f} ms  p95 {pct(resets, .95) * 1e3:7.1f} ms "
          f"(target p50 <= 500 ms)")
    print(f"grader closure    recorded once in {closure_s:.1f} s ({n_files} paths, {n_dirs} listed dirs); "
          f"checked per grading in {check_ms:.2f} ms beyond the `docker diff` the toolchain list reads")
    print(json.dumps({"metric": "persistent_shell_speedup_p50_vs_exec_run", "value": round(speedup, 2),
                      "target": 15.0, "higher_is_better": True,
                      "shell_p50_ms": round(s50 * 1e3, 3), "exec_run_p50_ms": round(e50 * 1e3, 2),
                      "reset_p50_s": round(statistics.median(resets), 3), "reset_target_s": 0.5,
                      "closure_record_s": round(closure_s, 2), "closure_check_ms": round(check_ms, 3)}))


def grader_closure_cost(env: TerminalEnv, task) -> tuple[float, float, int, int]:
    """(seconds to record `task`'s closure, ms to check one episode's `docker diff` against it,
    its paths, its listed dirs). The check runs on the diff of a container a command changed."""
    from envs.terminal.grader_closure import record

    t = time.perf_counter()
    closure = record(env, task)
    recorded = time.perf_counter() - t
    env.reset(options={"task_id": task.task_id})
    env.step("```bash\nmkdir -p /opt/x && touch /opt/x/y /etc/z\n```")
    changes = env._sandbox.changes()
    t = time.perf_counter()
    for _ in range(100):
        closure.tampering(changes, env._sandbox.is_dir)
    check_ms = (time.perf_counter() - t) / 100 * 1e3
    return recorded, check_ms, len(closure.files), len(closure.listed)


if __name__ == "__main__":
    main()
