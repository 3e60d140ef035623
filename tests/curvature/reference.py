"""Exact references in float64: GGN by torch.func and curvlinops, output Jacobians, captures."""

from __future__ import annotations

import torch
from curvlinops import GGNLinearOperator
from laplace import Laplace
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC


def output_hessian(logits: torch.Tensor, likelihood: str) -> torch.Tensor:
    """Hessian of the negative log likelihood w.r.t. the outputs, ``(N, K, K)``."""
    if likelihood == "regression":
        return torch.eye(logits.shape[1], dtype=logits.dtype, device=logits.device).expand(
            len(logits), -1, -1
        )
    p = logits.softmax(-1)
    return torch.diag_embed(p) - p[:, :, None] * p[:, None, :]


def parameter_jacobians(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``(N, K, P)`` Jacobians of the outputs w.r.t. all trainable parameters, in order."""
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    jac = torch.func.jacrev(lambda ps: torch.func.functional_call(model, ps, (x,)))(params)
    return torch.cat([j.flatten(start_dim=2) for j in jac.values()], dim=2)


def exact_ggn_torch_func(model: nn.Module, x: torch.Tensor, likelihood: str) -> torch.Tensor:
    """:math:`\\sum_n J_n^\\top \\Lambda_n J_n` (sum loss), ``(P, P)``."""
    J = parameter_jacobians(model, x)
    lam = output_hessian(model(x).detach(), likelihood)
    return torch.einsum("nkp,nkl,nlq->pq", J, lam, J)


def exact_ggn_curvlinops(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, likelihood: str
) -> torch.Tensor:
    """The same GGN from curvlinops' ``GGNLinearOperator``, materialised, ``(P, P)``.

    Regression uses laplace-torch's scale, the GGN of half the summed squared error.
    """
    classification = likelihood == "classification"
    loss = nn.CrossEntropyLoss(reduction="sum") if classification else nn.MSELoss(reduction="sum")
    scale = 1.0 if classification else 0.5
    params = [p for p in model.parameters() if p.requires_grad]
    op = GGNLinearOperator(model, loss, params, [(x, y)], check_deterministic=False)
    n = sum(p.numel() for p in params)
    eye = torch.eye(n, dtype=x.dtype, device=x.device)
    return scale * torch.stack([torch.as_tensor(op @ eye[:, i]) for i in range(n)], dim=1)


def fit_kron(model: nn.Module, loader: DataLoader, likelihood: str = "classification", **kwargs):
    """A Laplace approximation with EquivariantKFAC fitted on ``loader``.

    ``kwargs`` go to ``Laplace`` (``temperature``, ``backend_kwargs``, ...).
    """
    la = Laplace(
        model,
        likelihood,
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        **kwargs,
    )
    la.fit(loader)
    return la


def fit_kfac(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, likelihood: str, **kwargs
) -> Laplace:
    """A Laplace approximation with EquivariantKFAC fitted on ``(x, y)`` in one batch."""
    return fit_kron(model, DataLoader(TensorDataset(x, y), batch_size=len(x)), likelihood, **kwargs)


def parameter_slices(model: nn.Module) -> dict[str, slice]:
    """Name -> slice of each trainable parameter in the flattened parameter vector."""
    slices, start = {}, 0
    for name, p in model.named_parameters():
        if p.requires_grad:
            slices[name] = slice(start, start + p.numel())
            start += p.numel()
    return slices


def capture(module: nn.Module, model: nn.Module, x: torch.Tensor):
    """Input of ``module`` and per-example output Hessian-weighted output Jacobians.

    Returns ``(inputs, G)`` with ``G[n] = J_n^T Lambda_n J_n`` over the module's flattened
    output, ``J_n = d f_n / d out_n`` computed by torch.func through an additive probe.
    """
    store = {}

    def keep_input(_, args, out):
        store["input"] = args[0].detach()
        store["shape"] = out.shape
        return out + store["delta"] if "delta" in store else out

    handle = module.register_forward_hook(keep_input)
    try:
        logits = model(x).detach()
        probe = torch.zeros(store["shape"], dtype=x.dtype, device=x.device)

        def with_probe(delta):
            store["delta"] = delta
            return model(x)

        jac = torch.func.jacrev(with_probe)(probe)  # (N, K, N, *out)
    finally:
        handle.remove()
    n = len(x)
    index = torch.arange(n, device=x.device)
    jac = jac.flatten(start_dim=3)[index, :, index]  # (N, K, out)
    lam = output_hessian(logits, "classification")
    return store["input"], torch.einsum("nkp,nkl,nlq->npq", jac, lam, jac)
