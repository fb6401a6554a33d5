"""The ground layer: the seam types every package speaks (`types`), the typed config schemas
(`config`), atomic result files and the leaderboard row (`atomic`, `leaderboard`). It imports nothing
from the project, so envs, agents, trainers and the harness can all stand on it."""
