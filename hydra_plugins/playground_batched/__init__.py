"""Hydra launcher plugin `hydra/launcher=batched`: a multirun sweep trained as batches of PPO Playground agents."""
