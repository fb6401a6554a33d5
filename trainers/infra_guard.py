"""A batch of episodes that all failed on infrastructure (the Docker daemon hung, the browser gone,
the model's server down) says nothing about the policy. Trained on, it is an update of no samples that
the checkpoint files as done; evaluated, a 0.0 in the run's curve. The run stops instead, before its
checkpoint, so that resuming it once the infrastructure is back redoes that batch."""
from __future__ import annotations

from collections import Counter

from nextstate.types import Trajectory


class InfrastructureDown(SystemExit):
    """Every episode of a training batch or an evaluation was an infra failure: the run stops with
    the commonest reason, and its checkpoint stays at the last batch that ran."""

    def __init__(self, what: str, trajs: list[Trajectory]):
        reasons = Counter((t.infra_reason or "no reason given").strip()[:300] for t in trajs)
        (top, n), = reasons.most_common(1)
        said = f"{n} of them: {top}" + (f"; {len(reasons) - 1} other reason(s)" if len(reasons) > 1 else "")
        super().__init__(f"[nextstate] every one of the {len(trajs)} episodes of {what} failed on infrastructure "
                         f"({said}): the run stops before training on it or filing it")


def require_some_ran(trajs: list[Trajectory], what: str) -> None:
    """Raise InfrastructureDown when `trajs` is not empty and none of its episodes ran."""
    if trajs and all(t.infra_failure for t in trajs):
        raise InfrastructureDown(what, trajs)
