"""What the hard disk ceiling costs and buys, on the default daemon and on a second one started on
btrfs (envs/sandbox/btrfs_daemon.py), in one run: a sandbox's start (to its first command), its
removal, one look of the disk watch (`SizeRw`), and how much a root writer of 100 files of 4 MiB
lands against a 16m limit (the watch on the default daemon, the ceiling on btrfs). Ends with one JSON
line."""
from __future__ import annotations

import dataclasses
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.sandbox import Sandbox, SandboxConfig, docker_client  # noqa: E402
from envs.sandbox.btrfs_daemon import btrfs_daemon  # noqa: E402
from envs.sandbox.images import ensure_shared_image  # noqa: E402
from envs.terminal.env import TerminalEnvConfig  # noqa: E402
from nextstate.config import compose, typed  # noqa: E402

WRITER = "for i in $(seq 1 100); do head -c 4M /dev/zero > /opt/fill$i 2>/dev/null || break; done; sync"
COUNT = "cat /opt/fill* 2>/dev/null | wc -c"


def measure(client, image: str, config: SandboxConfig, n: int = 10) -> dict:
    starts, removals, looks, landed = [], [], [], []
    for i in range(n):
        t = time.perf_counter()
        sb = Sandbox(image, config, run_id="bench-disk-ceiling", client=client)
        sb.start()
        sb.exec("true")
        starts.append(time.perf_counter() - t)
        for _ in range(3):
            t = time.perf_counter()
            sb._layer_size()
            looks.append(time.perf_counter() - t)
        if i < 3:
            sb.exec(WRITER)
            time.sleep(1)  # the watch's next look
            landed.append(int(re.search(r"^(\d+)$", sb.exec(COUNT).output, re.M).group(1)) >> 20)
        t = time.perf_counter()
        sb.close()
        removals.append(time.perf_counter() - t)
    return {"start_p50_s": round(statistics.median(starts), 3), "remove_p50_s": round(statistics.median(removals), 3),
            "look_p50_ms": round(statistics.median(looks) * 1e3, 1), "landed_max_mib": max(landed)}


def main() -> None:
    cfg = compose(["env=terminal"])
    env_cfg = typed(cfg.env, TerminalEnvConfig)
    config = dataclasses.replace(typed(cfg.sandbox, SandboxConfig), disk_limit="16m", user="root", async_remove=False)
    image = ensure_shared_image(docker_client(), env_cfg.shared_image, env_cfg.base_image)
    rows = {"overlay2": measure(docker_client(), image, config)}
    with btrfs_daemon(images=(image,)) as (client, _):
        rows["btrfs"] = measure(client, image, config)
    for name, r in rows.items():
        print(f"{name:9s} start p50 {r['start_p50_s']:.3f} s  remove p50 {r['remove_p50_s']:.3f} s  "
              f"SizeRw look p50 {r['look_p50_ms']:.1f} ms  a 400 MiB writer landed at most {r['landed_max_mib']} MiB "
              f"(limit 16m: {'the ceiling' if name == 'btrfs' else 'the watch'})")
    o, b = rows["overlay2"], rows["btrfs"]
    ratios = {"start": b["start_p50_s"] / o["start_p50_s"], "remove": b["remove_p50_s"] / o["remove_p50_s"],
              "look": b["look_p50_ms"] / o["look_p50_ms"]}
    print(json.dumps({"metric": "disk_ceiling_btrfs_landed_mib", "value": b["landed_max_mib"],
                      "higher_is_better": False, "overlay2_landed_mib": o["landed_max_mib"],
                      **{f"{k}_ratio_btrfs_vs_overlay2": round(v, 2) for k, v in ratios.items()},
                      **{f"{k}_{n}": v for n, r in rows.items() for k, v in r.items()}}))

if __name__ == "__main__":
    main()
