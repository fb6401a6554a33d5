"""Ray for the async modes: a local Ray with no set-up by default, or a cluster (`ray.address=auto`,
`ray://head:10001`). conf/config.yaml's `ray:` keys, typed here."""
from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from trainers.ray_loops import Placement

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class RayConfig:
    address: str | None  # None: start a local Ray for this run; auto / ray://host:10001: join a cluster
    env_resources: dict[str, str] = field(default_factory=dict)  # env kind -> the custom resource its workers need
    local_resources: list[str] = field(default_factory=list)  # declared by a local Ray: this machine has them all
    trainer_gpus: float | None = None  # None: one where the cluster has a GPU
    max_restarts: int = 3

    def placement(self, env_kind: str | None) -> Placement:
        return Placement(self.env_resources.get(env_kind) if env_kind else None, self.trainer_gpus,
                         self.max_restarts)


def loopback_ray() -> None:
    """A Ray started here binds and connects on 127.0.0.1 (its default is this machine's interface
    address). Ray's own switch for one-machine use, read by `ray_constants` at import: set for this
    process and, through the environment, for the Ray processes it starts."""
    from ray._private import ray_constants

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


@contextmanager
def ray_session(cfg: RayConfig):
    """Ray for the duration of a run: joined or started (and then shut down) here, a started one on
    loopback only; one already initialized in this process (tests) is used as it is."""
    import ray

    if ray.is_initialized():
        yield
        return
    # the project's code (and a checkout's tests) importable in every worker, installed or not
    runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                                "TOKENIZERS_PARALLELISM": "false"}}
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    if cfg.address:
        ray.init(address=cfg.address, runtime_env=runtime_env, log_to_driver=True)
    else:
        loopback_ray()
        ray.init(address="local", resources={r: 1000 for r in cfg.local_resources}, include_dashboard=False,
                 runtime_env=runtime_env, log_to_driver=True, configure_logging=False)
    for sig, handler in handlers.items():  # Ray's own would abort on SIGTERM: the run must stop cleanly
        signal.signal(sig, handler)
    try:
        yield
    finally:
        ray.shutdown()
