"""F-FC's factors balanced under their priors: the optimiser's moments follow the weights."""

import pytest
import torch

from laplace_equivariance.marglik.factor_balance import rescale_optimizer_state


def test_balancing_rescales_the_optimizer_moments_with_the_weights():
    """A weight multiplied by s has gradients divided by s: Adam's first moment is divided by
    s and its second by s^2, SGD's momentum by s; state of another shape is left alone."""
    weight = torch.nn.Parameter(torch.ones(3, 2))
    optimizer = torch.optim.Adam([weight])
    optimizer.state[weight] = {
        "step": torch.tensor(4.0),
        "exp_avg": torch.ones(3, 2),
        "exp_avg_sq": torch.ones(3, 2),
        "momentum_buffer": torch.ones(3, 2),
    }
    rescale_optimizer_state(optimizer, weight, torch.full((3, 2), 2.0))
    state = optimizer.state[weight]
    assert torch.all(state["exp_avg"] == 0.5) and torch.all(state["exp_avg_sq"] == 0.25)
    assert torch.all(state["momentum_buffer"] == 0.5) and state["step"] == 4.0


def test_balancing_refuses_optimizer_state_it_cannot_rescale():
    """Adagrad keeps a running sum of squared gradients under another name: balancing would
    leave it belonging to the old scale, so it is refused, naming the state."""
    weight = torch.nn.Parameter(torch.ones(3, 2))
    optimizer = torch.optim.Adagrad([weight])
    with pytest.raises(ValueError, match=r"Adagrad also keeps \['sum'\]"):
        rescale_optimizer_state(optimizer, weight, torch.full((3, 2), 2.0))
