"""Dict-like batches (laplace-torch's ``dict_key_x`` / ``dict_key_y``) through every fit path.

laplace-torch passes a ``MutableMapping`` batch to the model whole and reads the targets from
``batch[dict_key_y]``. Each fit path of :class:`EquivariantKFAC` (separate and batched class
passes of the exact GGN, the Monte-Carlo Fisher, concatenated passes, regression) must give
on such batches the factors it gives on the same data as tensors.
"""

from __future__ import annotations

from collections import UserDict

import pytest
import torch
from laplace import Laplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC
from laplace_equivariance.curvature.batches import concatenated, first_example, repeated
from tests.curvature.test_backend import kron_laplace


class DictInputModel(nn.Module):
    """A two-layer network that reads its input from ``batch["features"]`` (or a tensor)."""

    def __init__(self, n_out: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, n_out))

    def forward(self, batch):
        x = batch["features"] if isinstance(batch, UserDict | dict) else batch
        return self.net(x)


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, items: list) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int):
        return self.items[index]


def collate_user_dict(items: list[dict]) -> UserDict:
    """Stack examples into one ``UserDict`` batch, as laplace-torch's own dict tests do."""
    return UserDict({key: torch.stack([item[key] for item in items]) for key in items[0]})


def loaders(likelihood: str, n: int = 11, batch_size: int = 3):
    """The same data as a dict-like loader and as a tensor loader."""
    x = torch.randn(n, 5, dtype=torch.float64)
    y = torch.randint(3, (n,)) if likelihood == "classification" else torch.randn(n, 3).double()
    items = [{"features": x[i], "labels": y[i]} for i in range(n)]
    dict_loader = DataLoader(
        ListDataset(items), batch_size=batch_size, collate_fn=collate_user_dict
    )
    tensor_loader = DataLoader(TensorDataset(x, y), batch_size=batch_size)
    return dict_loader, tensor_loader


FIT_PATHS = {
    "exact": {},
    "batched-classes": {"batched_classes": True},
    "monte-carlo": {"stochastic": True, "n_mc_samples": 4},
    "concatenated": {"fit_batch_size": 6},
}


@pytest.mark.parametrize("likelihood", ["classification", "regression"])
@pytest.mark.parametrize("path", FIT_PATHS)
def test_dict_batches_fit_as_tensor_batches(likelihood: str, path: str) -> None:
    model = DictInputModel(3).double()
    dict_loader, tensor_loader = loaders(likelihood)
    fitted = []
    for loader in (dict_loader, tensor_loader):
        torch.manual_seed(1)  # the same Monte-Carlo targets for both
        la = kron_laplace(
            model,
            likelihood,
            backend_kwargs=FIT_PATHS[path],
            dict_key_x="features",
            dict_key_y="labels",
        )
        la.fit(loader)
        fitted.append(la)
    from_dicts, from_tensors = fitted
    for dict_group, tensor_group in zip(
        from_dicts.H_facs.kfacs, from_tensors.H_facs.kfacs, strict=True
    ):
        for a, b in zip(dict_group, tensor_group, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(torch.as_tensor(from_dicts.loss), torch.as_tensor(from_tensors.loss))
    batch = next(iter(dict_loader))
    if likelihood == "classification":
        probs = from_dicts(batch, pred_type="glm", link_approx="probit")
        torch.testing.assert_close(probs.sum(-1), torch.ones(len(probs), dtype=torch.float64))


def test_dict_keys_missing_raise_key_error() -> None:
    """As laplace-torch: a dict batch without ``dict_key_y`` is a KeyError naming the key."""
    dict_loader, _ = loaders("classification")
    la = Laplace(
        DictInputModel(3).double(),
        "classification",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        dict_key_y="targets",
    )
    with pytest.raises(KeyError, match="targets"):
        la.fit(dict_loader)


def test_batch_helpers_act_on_every_tensor_value() -> None:
    batch = UserDict({"features": torch.arange(6.0).reshape(3, 2), "name": "a"})
    twice = repeated(batch, 2)
    assert isinstance(twice, UserDict) and twice["name"] == "a"
    torch.testing.assert_close(twice["features"], torch.cat([batch["features"]] * 2))
    torch.testing.assert_close(first_example(batch)["features"], batch["features"][:1])
    joined = concatenated([batch, batch])
    assert joined["features"].shape == (6, 2)
    with pytest.raises(TypeError, match="fit_batch_size"):
        concatenated([batch, UserDict({"features": batch["features"], "name": "b"})])
    with pytest.raises(TypeError, match="fit_batch_size"):
        concatenated([batch, (torch.zeros(1), torch.zeros(1))])
