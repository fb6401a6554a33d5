"""Make the templated GUI suite's instance list with the real browser (envs/gui/templated.py says why
it is a list): `python -m harness.gui_instances [config overrides]`, 4-5 min. It rewrites
envs/gui/templated_instances.json; the same wheel and browser give the same list."""
from __future__ import annotations

import sys

from tqdm import tqdm

from envs.gui.env import GUIEnv
from envs.gui.templated import MANIFEST, PAGES, QUOTA, build_manifest, instance, write_manifest
from harness.job import env_config
from nextstate.config import compose


def main(argv: list[str]) -> None:
    cfg = compose(["env=gui", *argv])
    env = GUIEnv(env_config(cfg.env), tasks=[instance(PAGES[0], 0, "train", "")])
    bar = tqdm(total=sum(map(sum, QUOTA.values())), desc="templated GUI instances")
    try:
        manifest = build_manifest(env, progress=lambda *_: bar.update())
    finally:
        bar.close()
        env.close()
    write_manifest(manifest)
    print(f"{len(manifest['instances'])} instances -> {MANIFEST}")


if __name__ == "__main__":
    main(sys.argv[1:])
