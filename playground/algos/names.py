"""The names config keys choose algorithms by, as verl spells them; torch-free, so a config can be checked
without loading torch (the explorer checks its knobs this way).

Each registry accepts exactly its declared names: `advantages.ADV_ESTIMATORS` the estimators, `losses.POLICY_LOSSES`
the policy losses (tests/algos/test_registry.py checks that every declared name is registered).
"""

ADV_ESTIMATORS = ("gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "opo", "gpg",
                  "grpo_passk")
POLICY_LOSSES = ("vanilla", "gspo", "gpg", "clip_cov", "kl_cov", "geo_mean")
LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")  # each also with "+" (straight-through)
# The estimators that need several samples per prompt: they normalise within a group (one uid per prompt).
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_plus_plus_baseline", "opo", "gpg", "grpo_passk")
