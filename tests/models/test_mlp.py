"""`playground/models/mlp.py`: K MLP agents as rows of one tensor, each exactly the MLP it would be alone; the gym
actor's log-probs and entropy as torch.distributions computes them; the world model's masked loss."""

from __future__ import annotations

import math

import torch

from playground.models.mlp import AgentMLP, GymActor, MLPWorldModel


def _gens(*seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def test_agent_k_of_a_batch_is_the_mlp_it_would_be_alone():
    batch, alone = AgentMLP([3, 8, 2], _gens(1, 2, 3), out_gain=0.01), AgentMLP([3, 8, 2], _gens(2), out_gain=0.01)
    assert torch.equal(batch.flat[1:2], alone.flat)  # weights depend only on the agent's own seed
    x = torch.randn(3, 5, 3)
    assert torch.allclose(batch.forward(x)[1:2], alone.forward(x[1:2]), atol=1e-6)


def test_layers_are_views_of_the_flat_weights_and_grads_land_in_one_buffer():
    net = AgentMLP([3, 4, 1], _gens(0, 1), out_gain=1.0)
    assert net.num_params == 3 * 4 + 4 + 4 * 1 + 1
    net.forward(torch.randn(2, 6, 3)).sum().backward()
    assert net.flat.grad.abs().sum() > 0  # autograd accumulated into the shared buffer in place
    with torch.no_grad():
        net.flat.zero_()
    assert net.forward(torch.randn(2, 6, 3)).abs().sum() == 0  # the layers see the new weights: views, not copies


def test_initialisation_is_orthogonal_with_the_ppo_gains():
    net = AgentMLP([64, 64, 2], _gens(0), out_gain=0.01)
    w0, _ = net._views(net.flat)[0]  # (K, in, out), stored for x @ W
    gram = w0[0].T @ w0[0]
    assert torch.allclose(gram, 2 * torch.eye(64), atol=1e-4)  # gain sqrt(2) on hidden layers
    w_out, b_out = net._views(net.flat)[-1]
    assert torch.allclose(w_out[0].T @ w_out[0], 1e-4 * torch.eye(2), atol=1e-6) and b_out.abs().sum() == 0


def test_categorical_log_prob_and_entropy_match_torch_distributions():
    actor = GymActor(4, [16], _gens(3), num_actions=3, temperature=0.7)
    obs, actions = torch.randn(1, 10, 4), torch.randint(3, (1, 10))
    logp, entropy = actor.log_prob_and_entropy({"obs": obs, "actions": actions})
    dist = torch.distributions.Categorical(logits=actor.net.forward(obs) / 0.7)
    assert torch.allclose(logp.squeeze(-1), dist.log_prob(actions), atol=1e-6)
    assert torch.allclose(entropy.squeeze(-1), dist.entropy(), atol=1e-6)
    assert actor.max_entropy() == math.log(3)


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    actor = GymActor(3, [16], _gens(4), action_dim=2, init_log_std=-0.5)
    obs, actions = torch.randn(1, 7, 3), torch.randn(1, 7, 2)
    logp, entropy = actor.log_prob_and_entropy({"obs": obs, "actions": actions})
    dist = torch.distributions.Normal(actor.net.forward(obs), torch.full((1, 7, 2), math.exp(-0.5)))
    assert torch.allclose(logp.squeeze(-1), dist.log_prob(actions).sum(-1), atol=1e-5)
    assert torch.allclose(entropy.squeeze(-1), dist.entropy().sum(-1), atol=1e-5)
    assert actor.max_entropy() is None


def test_world_model_loss_ignores_masked_rows():
    model = MLPWorldModel(2, 3, [8], _gens(5), discrete=True)
    batch = {"obs": torch.randn(1, 4, 2), "actions": torch.randint(3, (1, 4)), "final_obs": torch.randn(1, 4, 2),
             "scores": torch.randn(1, 4, 1), "response_mask": torch.tensor([[[1.0], [1.0], [0.0], [0.0]]])}
    first_two = {k: v[:, :2] for k, v in batch.items()}
    first_two["response_mask"] = torch.ones(1, 2, 1)
    changed = {**batch, "final_obs": batch["final_obs"].clone()}
    changed["final_obs"][:, 2:] += 100.0  # a masked row's target does not count
    assert torch.allclose(model.loss(batch), model.loss(first_two)) and torch.allclose(model.loss(changed),
                                                                                        model.loss(batch))
