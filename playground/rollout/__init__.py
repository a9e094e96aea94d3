"""The rollout: what verl's inference engine does, with the engine's own copy of the weights.

- `decode`: the one decode loop (KV cache, sampling, the log-probs the engine reports), with an optional per-turn
  environment hook for multi-turn episodes;
- `turns`: that hook, verl's agent loop, and the interface an episode's environment meets (`Episode`);
- `weights`: the engine's weights (its dtype, staleness, weight sync) beside the trainer's.

The rollout worker (`playground.step.workers.TaskRollout`) holds the weights and hands them to the task's generation.
"""
