"""verl's rollout correction formulas (`rollout_corr_helper.py`) on small tensors, against values computed by hand
(plain Python over the valid tokens, one row at a time), and the same on K batched agents."""

from __future__ import annotations

import math

import pytest
import torch

from playground.algos.rollout_correction.importance import (
    compute_offpolicy_metrics,
    compute_rollout_correction_and_rejection_mask,
    compute_rollout_correction_weights,
)
from playground.algos.rollout_correction.rejection import compute_rollout_rejection_mask

# two rows, the second with a padded last token; log r = logp_old − logp_rollout
LOG_RATIO = [[0.1, -0.2, 0.0], [0.3, -0.1, 0.0]]
MASK = [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]
OLD = [[-1.0, -2.0, -0.5], [-0.7, -1.5, 0.0]]


def tensors(log_ratio=LOG_RATIO, mask=MASK, old=OLD):
    old_t = torch.tensor(old, dtype=torch.float64)
    return old_t, old_t - torch.tensor(log_ratio, dtype=torch.float64), torch.tensor(mask, dtype=torch.float64)


def valid(rows, mask=MASK):
    """The valid entries of each row."""
    return [[v for v, m in zip(row, mrow) if m] for row, mrow in zip(rows, mask)]


def mean(xs):
    return sum(xs) / len(xs)


def flat(rows):
    return [v for row in rows for v in row]


def same(tensor, nested):
    assert torch.allclose(tensor, torch.tensor(nested, dtype=tensor.dtype), rtol=1e-12, atol=1e-12), tensor.tolist()


def close(actual, expected, tol=1e-9):
    assert float(actual) == pytest.approx(expected, abs=tol, rel=1e-7)  # masked means divide by (count + 1e-8)


# ---- the off-policy diagnostics ----------------------------------------------------------------------------------
def test_offpolicy_metrics_by_hand():
    old, rollout, mask = tensors()
    m = compute_offpolicy_metrics(old, rollout, mask)
    lr = valid(LOG_RATIO)
    old_rows, rollout_rows = valid(OLD), valid((old - torch.tensor(LOG_RATIO, dtype=torch.float64)).tolist())
    close(m["kl"], mean([-x for x in flat(lr)]))  # E[logp_rollout − logp_old]
    close(m["k3_kl"], mean([math.exp(x) - x - 1 for x in flat(lr)]))
    close(m["chi2_token"], mean([math.exp(2 * x) for x in flat(lr)]) - 1)
    close(m["chi2_seq"], mean([math.exp(2 * sum(row)) for row in lr]) - 1)
    train_m = [mean(r) for r in old_rows]
    roll_m = [mean(r) for r in rollout_rows]
    close(m["training_ppl"], mean([math.exp(-x) for x in train_m]))
    close(m["training_log_ppl"], mean([-x for x in train_m]))
    close(m["rollout_ppl"], mean([math.exp(-x) for x in roll_m]))
    close(m["rollout_log_ppl"], mean([-x for x in roll_m]))
    diffs = [r - t for r, t in zip(roll_m, train_m)]
    close(m["log_ppl_diff"], mean(diffs))
    close(m["log_ppl_abs_diff"], mean([abs(d) for d in diffs]))
    close(m["log_ppl_diff_max"], max(diffs))
    close(m["log_ppl_diff_min"], min(diffs))
    close(m["ppl_ratio"], mean([math.exp(d) for d in diffs]))


def test_equal_policies_have_zero_divergence_and_no_rollout_keys_without_its_log_probs():
    old, _, mask = tensors()
    m = compute_offpolicy_metrics(old, old.clone(), mask)
    for key in ("kl", "k3_kl", "chi2_token", "chi2_seq", "log_ppl_diff", "log_ppl_abs_diff"):
        close(m[key], 0.0, tol=1e-8)
    close(m["ppl_ratio"], 1.0)
    assert set(compute_offpolicy_metrics(old, None, mask)) == {"training_ppl", "training_log_ppl"}


# ---- IS weights -------------------------------------------------------------------------------------------------
def test_token_tis_weights_and_metrics_by_hand():
    log_ratio = [[1.0, -0.2, 0.0], [0.3, -1.0, 0.5]]  # e^1 = 2.718 is capped at 2; the padded 0.5 counts for nothing
    _, _, mask = tensors()
    weights, m = compute_rollout_correction_weights(torch.tensor(log_ratio, dtype=torch.float64), mask, "token", 2.0)
    raw = [[math.exp(x) for x in row] for row in valid(log_ratio)]
    applied = [[min(w, 2.0) for w in row] for row in raw]
    same(weights, [[2.0, math.exp(-0.2), 1.0], [math.exp(0.3), math.exp(-1.0), 0.0]])
    w = flat(applied)
    close(m["rollout_is_mean"], mean(w))
    close(m["rollout_is_max"], 2.0)
    close(m["rollout_is_min"], math.exp(-1.0))
    close(m["rollout_is_ratio_fraction_high"], 1 / 5)  # raw e^1 > 2
    close(m["rollout_is_ratio_fraction_low"], 1 / 5)  # raw e^-1 < 1/2
    close(m["rollout_is_std"], math.sqrt(mean([x * x for x in w]) - mean(w) ** 2))
    close(m["rollout_is_eff_sample_size"], 1 / mean([(x / (mean(w) + 1e-8)) ** 2 for x in w]), tol=1e-7)
    seq = [mean(row) for row in applied]
    close(m["rollout_is_seq_mean"], mean(seq))
    close(m["rollout_is_seq_std"], math.sqrt(sum((s - mean(seq)) ** 2 for s in seq) / (len(seq) - 1)))
    close(m["rollout_is_seq_max"], max(seq))
    close(m["rollout_is_seq_min"], min(seq))
    close(m["rollout_is_seq_max_deviation"], max(abs(s - 1) for s in seq))
    raw_seq = [mean(row) for row in raw]
    close(m["rollout_is_seq_fraction_high"], mean([float(s > 2.0) for s in raw_seq]))
    close(m["rollout_is_seq_fraction_low"], mean([float(s < 0.5) for s in raw_seq]))
    assert "rollout_is_oob_ratio" not in m and "rollout_is_batch_norm_factor" not in m


def test_sequence_is_is_the_capped_product_of_the_token_ratios():
    log_ratio = [[0.5, 0.4, 0.0], [-0.3, -0.6, 9.0]]  # row sums 0.9 (e^0.9 = 2.46, capped) and -0.9 (pad ignored)
    _, _, mask = tensors()
    weights, m = compute_rollout_correction_weights(torch.tensor(log_ratio, dtype=torch.float64), mask, "sequence", 2.0)
    same(weights, [[2.0, 2.0, 2.0], [math.exp(-0.9), math.exp(-0.9), 0.0]])
    close(m["rollout_is_max"], math.exp(0.9))  # the uncapped extreme, from the log-ratio sums
    close(m["rollout_is_min"], math.exp(-0.9))
    close(m["rollout_is_mean"], (3 * 2.0 + 2 * math.exp(-0.9)) / 5)
    close(m["rollout_is_ratio_fraction_high"], 0.5)  # rows with Σ log r > log 2
    close(m["rollout_is_ratio_fraction_low"], 0.5)  # rows with Σ log r < log 0.5 (−0.9 < −0.693)


def test_icepop_zeroes_the_weights_outside_its_band_and_reports_them():
    log_ratio = [[math.log(6.0), math.log(0.4), 0.2], [0.0, math.log(0.5), 0.0]]
    _, _, mask = tensors()
    weights, m = compute_rollout_correction_weights(torch.tensor(log_ratio, dtype=torch.float64), mask, "token",
                                                    "0.5_5.0")
    same(weights, [[0.0, 0.0, math.exp(0.2)], [1.0, 0.5, 0.0]])  # 0.5 itself is kept
    close(m["rollout_is_oob_ratio"], 2 / 5)
    close(m["rollout_is_ratio_fraction_high"], 1 / 5)
    close(m["rollout_is_ratio_fraction_low"], 1 / 5)
    close(m["rollout_is_min"], 0.0)


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_batch_normalisation_makes_the_mean_weight_one(level):
    log_ratio = torch.tensor([[0.2, -0.1, 0.3], [0.4, 0.1, 0.0]], dtype=torch.float64)
    _, _, mask = tensors()
    plain, _ = compute_rollout_correction_weights(log_ratio, mask, level, 10.0)
    weights, m = compute_rollout_correction_weights(log_ratio, mask, level, 10.0, rollout_is_batch_normalize=True)
    if level == "token":
        factor = mean(flat(valid(plain.tolist())))
        close((weights * mask).sum() / mask.sum(), 1.0)
    else:
        factor = mean([row[0] for row in valid(plain.tolist())])  # one weight per sequence
    close(m["rollout_is_batch_norm_factor"], factor)
    assert torch.allclose(weights, plain / factor)


# ---- rejection sampling -----------------------------------------------------------------------------------------
def test_token_k1_rejects_tokens_outside_the_ratio_band():
    log_ratio = [[1.0, -0.2, 0.0], [0.3, -1.0, 5.0]]  # k1 = −log r; kept: log 0.5 <= k1 <= log 2
    _, _, mask = tensors()
    new_mask, m = compute_rollout_rejection_mask(torch.tensor(log_ratio, dtype=torch.float64), mask, "token_k1",
                                                 "0.5_2.0")
    assert new_mask.tolist() == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    close(m["rollout_rs_token_k1_masked_fraction"], 2 / 5)
    close(m["rollout_rs_token_k1_seq_masked_fraction"], 1.0)  # both rows lose a token
    close(m["rollout_rs_masked_fraction"], 2 / 5)
    close(m["rollout_rs_seq_masked_fraction"], 1.0)
    k1 = [-x for x in flat(valid(log_ratio))]
    close(m["rollout_rs_token_k1_mean"], mean(k1))
    close(m["rollout_rs_token_k1_max"], max(k1))
    close(m["rollout_rs_token_k1_min"], min(k1))
    close(m["rollout_rs_token_k1_fraction_high"], mean([float(v > math.log(2)) for v in k1]))
    close(m["rollout_rs_token_k1_fraction_low"], mean([float(v < math.log(0.5)) for v in k1]))
    clamped = [min(max(v, math.log(0.5)), math.log(2)) for v in k1]
    close(m["rollout_rs_token_k1_std"], math.sqrt(mean([c * c for c in clamped]) - mean(clamped) ** 2))
    seq = [mean([-x for x in row]) for row in valid(log_ratio)]
    close(m["rollout_rs_token_k1_seq_mean"], mean(seq))
    close(m["rollout_rs_token_k1_seq_max_deviation"], max(abs(s) for s in seq))
    close(m["rollout_rs_token_k1_seq_fraction_low"], mean([float(s < math.log(0.5)) for s in seq]))


def test_sequence_options_reject_whole_rows():
    log_ratio = [[0.1, 0.1, 0.1], [0.05, -0.05, 7.0]]  # row 0: Σ k1 = −0.3, mean −0.1; row 1: 0 (pad ignored)
    _, _, mask = tensors()
    lr = torch.tensor(log_ratio, dtype=torch.float64)
    kept, m = compute_rollout_rejection_mask(lr, mask, "seq_mean_k1", "0.999_1.001")  # Geo-RS
    assert kept.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    close(m["rollout_rs_seq_mean_k1_seq_masked_fraction"], 0.5)
    close(m["rollout_rs_seq_mean_k1_max"], 0.0)  # per-row values, over the valid rows
    close(m["rollout_rs_seq_mean_k1_min"], -0.1)
    close(m["rollout_rs_seq_mean_k1_mean"], (3 * -0.1 + 2 * 0.0) / 5)  # token-weighted
    close(m["rollout_rs_seq_mean_k1_fraction_low"], 0.5)
    kept, m = compute_rollout_rejection_mask(lr, mask, "seq_sum_k1", "0.5_2.0")  # Σ k1 = −0.3 is inside the band
    assert kept.tolist() == MASK
    close(m["rollout_rs_masked_fraction"], 0.0)
    k3 = [[math.exp(x) - 1 - x for x in row] for row in valid(log_ratio)]
    kept, m = compute_rollout_rejection_mask(lr, mask, "seq_max_k3", 0.004)
    assert kept.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]  # row 0's max k3 = 0.00517 > 0.004
    close(m["rollout_rs_seq_max_k3_max"], max(max(r) for r in k3))
    per_token = [min(max(row), 0.004) for row in k3 for _ in row]  # each row's max, capped, on each of its tokens
    close(m["rollout_rs_seq_max_k3_std"], math.sqrt(mean([v * v for v in per_token]) - mean(per_token) ** 2))
    assert "rollout_rs_seq_max_k3_seq_fraction_low" not in m and float(m["rollout_rs_seq_max_k3_fraction_low"]) == 0


def test_options_chain_and_the_overall_fractions_count_each_token_once():
    log_ratio = [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    _, _, mask = tensors()
    kept, m = compute_rollout_rejection_mask(torch.tensor(log_ratio, dtype=torch.float64), mask,
                                             "token_k1,seq_max_k2,token_k1", "2.0,0.4")  # duplicates dropped
    assert kept.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]  # token_k1 drops one token, seq_max_k2 the row
    close(m["rollout_rs_token_k1_masked_fraction"], 1 / 5)
    close(m["rollout_rs_seq_max_k2_masked_fraction"], 3 / 5)
    close(m["rollout_rs_masked_fraction"], 3 / 5)
    close(m["rollout_rs_seq_masked_fraction"], 0.5)


@pytest.mark.parametrize("rs, threshold, message", [
    ("token_k4", 1.0, "comma-separated options"), ("token_k2", "0.5_2", "single upper bound"),
    ("token_k1,seq_sum_k1", "1.5,2,3", "exactly 2"), ("seq_mean_k3", -1.0, "positive bounds")])
def test_bad_rejection_specs_are_refused(rs, threshold, message):
    _, _, mask = tensors()
    with pytest.raises(ValueError, match=message):
        compute_rollout_rejection_mask(torch.zeros(2, 3), mask, rs, threshold)


# ---- the combined entry and K agents ---------------------------------------------------------------------------
def test_combined_entry_prefixes_every_metric_and_leaves_the_input_mask_alone():
    old, rollout, mask = tensors(log_ratio=[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    weights, new_mask, m = compute_rollout_correction_and_rejection_mask(
        old, rollout, mask, rollout_is="token", rollout_is_threshold=2.0, rollout_rs="token_k1",
        rollout_rs_threshold="0.5_2.0")
    assert all(key.startswith("rollout_corr/") for key in m)
    assert {"rollout_corr/kl", "rollout_corr/rollout_is_mean", "rollout_corr/rollout_rs_masked_fraction"} <= set(m)
    assert new_mask.tolist() == [[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]] and mask.tolist() == MASK
    assert weights[0, 0] == 2.0
    none, same_mask, only_diag = compute_rollout_correction_and_rejection_mask(old, rollout, mask)
    assert none is None and same_mask.tolist() == MASK
    assert not any("rollout_is" in k or "rollout_rs" in k for k in only_diag)
    with pytest.raises(ValueError, match="rollout_rs_threshold"):
        compute_rollout_correction_and_rejection_mask(old, rollout, mask, rollout_rs="token_k1")


@pytest.mark.parametrize("settings", [
    {"rollout_is": "token", "rollout_is_threshold": 2.0},
    {"rollout_is": "sequence", "rollout_is_threshold": "0.5_5.0", "rollout_is_batch_normalize": True},
    {"rollout_rs": "token_k1,seq_mean_k3,seq_max_k2", "rollout_rs_threshold": "0.8_1.2,0.01,0.05"}])
def test_k_batched_agents_get_each_its_own_metrics(settings):
    gen = torch.Generator().manual_seed(0)
    old = -torch.rand(2, 4, 5, generator=gen, dtype=torch.float64) * 2
    rollout = old - torch.randn(2, 4, 5, generator=gen, dtype=torch.float64) * 0.3
    mask = (torch.rand(2, 4, 5, generator=gen) > 0.3).double()
    mask[..., 0] = 1.0
    weights, new_mask, metrics = compute_rollout_correction_and_rejection_mask(old, rollout, mask, **settings)
    for k in range(2):
        w_k, mask_k, m_k = compute_rollout_correction_and_rejection_mask(old[k], rollout[k], mask[k], **settings)
        assert torch.equal(new_mask[k], mask_k)
        if weights is not None:
            assert torch.allclose(weights[k], w_k)
        assert set(m_k) == set(metrics)
        for key, value in m_k.items():
            assert float(metrics[key][k]) == pytest.approx(float(value), rel=1e-9, abs=1e-12), key
