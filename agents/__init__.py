"""Agents: the policy interface (`base`), the rollout (`rollout`, `pool`), agent construction (`factory`)
and model serving (`serving/`)."""
