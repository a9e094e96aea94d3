"""One PPO training step for K agents: the trainer, its workers and the parts they call."""
