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


class InfraStreak:
    """`mode=async`'s guard. Its loops draw groups one at a time and a group that never ran gives no
    sample, so with the daemon down they would go on drawing groups without ever updating. After
    `limit` groups in a row of nothing but infra failures (one group of them can be a passing
    hiccup), the run stops; its checkpoint stays at its last update."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"InfraStreak needs limit >= 1, got {limit}")
        self.limit = limit
        self.streak: list[Trajectory] = []
        self.groups = 0  # groups in the streak

    def see(self, group_no: int, group: list[Trajectory]) -> None:
        """Count rollout group `group_no`; raise InfrastructureDown at the `limit`-th group in a row that never ran."""
        if not group or not all(t.infra_failure for t in group):
            self.streak, self.groups = [], 0
            return
        self.streak += group
        self.groups += 1
        if self.groups >= self.limit:
            raise InfrastructureDown(f"the last {self.groups} rollout groups (up to group {group_no})", self.streak)
