"""Typed views of the Hydra config. Values live in conf/ only; these dataclasses give them types,
and `typed(node, Cls)` validates a config node into one (a wrong key or type fails loudly)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

from omegaconf import DictConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
T = TypeVar("T")


class ConfigError(ValueError):
    """A config value that names something that is not there (a persona, a task dir, a key): the run
    stops with this one line, naming the key, before anything starts."""


def unknown_root_keys(added: list[str]) -> list[str]:
    """The `+key=value` overrides whose top-level key is neither a key of conf/config.yaml nor a config
    group (a dir of conf/): Hydra accepts them and nothing reads them, so a typo would pass silently."""
    known = set(OmegaConf.load(CONF_DIR / "config.yaml").keys()) | {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    known |= {"hydra", "defaults"}
    keys = [o.lstrip("+~").split("=", 1)[0] for o in added if o.startswith("+") and not o.startswith("++")]
    return [k for k in keys if k.split(".", 1)[0].split("@", 1)[0] not in known]


@dataclass
class EnvConfig:
    """What every env's config has; each env extends it with its own fields (envs/<env>.py)."""

    name: str
    env_id: str
    max_steps: int
    max_seconds: float | None  # an episode's wall clock (None: none, as a reproducible run needs)
    system_prompt: str


def suite_of(env_cfg) -> str:
    """The task set a run used, as its results are filed: the env's `suite`, unless `tasks_dir` points
    outside the bundled suites (envs/tasks/): then the dir itself, so runs on two different task dirs
    are never filed, compared or replaced as one suite."""
    suite = getattr(env_cfg, "suite", "-")
    tasks_dir = getattr(env_cfg, "tasks_dir", None)
    if tasks_dir:
        path = Path(tasks_dir) if Path(tasks_dir).is_absolute() else REPO_ROOT / tasks_dir
        if not path.resolve().is_relative_to((REPO_ROOT / "envs" / "tasks").resolve()):
            return f"dir:{path.resolve()}"
    return suite


@dataclass
class ModelConfig:
    name: str
    source: str  # a cache name (with package + gguf_file) or a local model directory
    package: str | None
    gguf_file: str | None
    dtype: str
    max_new_tokens: int
    temperature: float
    top_p: float
    max_prompt_tokens: int
    threads: int | None
    init_from: str | None


@dataclass
class PathsConfig:
    results_dir: str
    cache_dir: str


SPLITS = ("train", "test", "all")


@dataclass
class RunConfig:
    """The top-level public keys every mode reads (conf/config.yaml)."""

    split: str
    limit: int | None
    seed: int
    parallel: int
    progress: bool


def run_config(cfg: DictConfig) -> RunConfig:
    """The top-level keys, typed and checked, so that a bad value stops the run before anything starts
    (a `limit=-1` once ran every task but the last, without a word). Exits naming the key."""
    from omegaconf.errors import ValidationError

    given = {f.name: cfg.get(f.name) for f in fields(RunConfig)}
    try:
        run = typed(given, RunConfig)
    except ValidationError as e:
        key = str(e.full_key)
        raise SystemExit(f"{key}={given.get(key)!r}: {str(e).splitlines()[0]}") from None
    if run.split not in SPLITS:
        raise SystemExit(f"split={run.split!r}: choose one of {', '.join(SPLITS)}")
    check_ranges("", run, at_least={"limit": 1, "parallel": 1})  # limit: null for all
    return run


def model_config(node: DictConfig) -> ModelConfig:
    """The typed model config, its numbers checked (a zero `max_new_tokens` would answer nothing)."""
    model = typed(node, ModelConfig)
    check_ranges("model", model, at_least={"max_new_tokens": 1, "max_prompt_tokens": 1, "temperature": 0,
                                           "threads": 1}, above={"top_p": 0})
    return model


def check_ranges(section: str, config: object, *, at_least: dict[str, float] | None = None,
                 above: dict[str, float] | None = None) -> None:
    """Stop at the first value out of its range, as `section.key=value: must be ...`, so that a bad
    number is found when the run starts, not minutes later (or never: a negative limit slices quietly).
    A value of None means unset and passes."""
    for rules, word, ok in ((at_least or {}, "at least", float.__ge__), (above or {}, "above", float.__gt__)):
        for key, bound in rules.items():
            value = getattr(config, key)
            if value is not None and not ok(float(value), float(bound)):
                raise SystemExit(f"{section + '.' if section else ''}{key}={value}: must be {word} {bound:g}")


def typed(node: DictConfig | dict, cls: type[T]) -> T:
    schema = OmegaConf.structured(cls)
    merged = OmegaConf.merge(schema, node)
    return OmegaConf.to_object(merged)  # type: ignore[return-value]


def conf_defaults(group: str, option: str, cls: type[T]) -> T:
    """The typed values of conf/<group>/<option>.yaml read as plain YAML: what a component built
    without a config gets (`gymnasium.make("nextstate/Terminal-v0")`). No Hydra, so an env never depends
    on the app; the values are still written once, in conf/."""
    return typed(_group_option(group, option), cls)


def _group_option(group: str, option: str) -> DictConfig:
    """conf/<group>/<option>.yaml with its own `defaults` list (other options of the same group and
    `_self_`, as conf/signal/*.yaml list `_base`) merged in order, as Hydra composes it."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no config file {path}")
    node = OmegaConf.load(path)
    defaults = list(node.pop("defaults", None) or [])
    if "_self_" not in defaults:
        defaults.append("_self_")
    merged = OmegaConf.create()
    for name in defaults:
        merged = OmegaConf.merge(merged, node if name == "_self_" else _group_option(group, name))
    return merged


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The composed config outside a Hydra app (tests, library use, gym.make defaults)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return hydra_compose(config_name="config", overrides=overrides or [])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose(config_name="config", overrides=overrides or [])
