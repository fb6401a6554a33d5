"""Trainers: the math (signals, losses, the PPO update, checkpoints) and every loop that applies it:
sync (`sync`), async on Ray (`async_train`, `ray_loops`), SFT (`sft_run`), the proxy (`proxy/`), with the
step-level feedback they read (`feedback/`)."""
