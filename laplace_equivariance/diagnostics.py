r"""What symmetry a fitted model learned: prior precisions and effective parameters per path.

Paper App. D. For a parameter tensor with Kronecker-factored GGN ``B (x) A`` (eigenvalues
``b_i``, ``a_j``, scaled by laplace-torch's ``1 / (sigma^2 T)``) and prior precision
``delta``, MacKay's effective number of parameters (App. D.2) is

.. math::
    \gamma = \sum_{i,j} \frac{b_i a_j}{b_i a_j + \delta},

between 0 (the prior decides every direction: the path is "off") and the tensor's size. Per
path of a relaxed layer, ``gamma`` is summed over the path's tensors; the *normalised*
effective number divides by the path's parameter count, and the *relative* one is a path's
normalised number over the sum of the layer's (so the paths of a layer share 1). The path
with the largest relative share is the layer's learned type (the paper's Fig. 3).

The report also gives each tensor's squared norm ``||theta||^2``. With the Laplace marginal
likelihood (paper Eq. 9) ``log p(D | theta) - delta ||theta||^2 / 2 + (P / 2) log delta -
(1 / 2) sum_{i,j} log(b_i a_j + delta)`` at fixed ``theta``, its derivative in ``log delta``
is ``(gamma - delta ||theta||^2) / 2``, which vanishes where

.. math::
    \delta \, \lVert\theta\rVert^2 = P - \sum_{i,j} \frac{\delta}{b_i a_j + \delta} = \gamma,

MacKay's fixed point: at converged precisions a path's ``gamma`` equals the sum of
``delta ||theta||^2`` over its tensors. A path keeps a weak prior while its weights are
large, so early in training (weights still near a large initialisation) the shares say as
much about the initialisation as about the data.

Effective parameters say how well the data determine a path's weights, not how much of the
layer's output the path carries: a CONV path with prior precision 1e5 and weights of squared
norm 1e-5 can keep a relative share near one half when the FC path beside it is just as poorly
determined per parameter. :func:`path_output_shares` measures the second on data: path ``p``'s
share of layer ``l`` is

.. math::
    s_p = \frac{\sum_n \lVert y_p(x_n) \rVert^2}{\sum_q \sum_n \lVert y_q(x_n) \rVert^2},

with ``y_p(x_n)`` the path's term of the layer's sum on the layer's input for example ``n``
(:meth:`~laplace_equivariance.layers.RelaxedLayer.path_outputs`). A path under 1% of the
output energy is off in what the network computes.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from laplace.baselaplace import KronLaplace
from torch import nn

from laplace_equivariance.curvature.fitted import fitted_decomposition, kron_eigenvalues
from laplace_equivariance.curvature.registry import likelihood_scale, require_fitted
from laplace_equivariance.layers import RelaxedLayer
from laplace_equivariance.marglik.priors import parameter_paths

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn
    from matplotlib.figure import Figure

__all__ = [
    "effective_parameters",
    "occam_terms",
    "path_output_shares",
    "path_shift_errors",
    "plot_symmetry",
    "symmetry_report",
]


def effective_parameters(la: KronLaplace) -> list[float]:
    """MacKay's effective number of parameters of every parameter tensor (App. D.2).

    Args:
        la: A fitted Kronecker-factored Laplace approximation (``hessian_structure="kron"``).

    Returns:
        One ``gamma`` per trainable parameter tensor, in ``model.parameters()`` order.

    Raises:
        TypeError: If ``la`` is not Kronecker-factored.
        AttributeError: If ``la`` has not been fitted.
    """
    return _per_tensor(la, lambda curvature, delta: (curvature / (curvature + delta)).sum())


def occam_terms(la: KronLaplace) -> list[float]:
    r"""Each parameter tensor's Occam term of the Laplace evidence (paper Eq. 9).

    .. math::
        o = \frac{1}{2} \sum_{i,j} \log\Big(1 + \frac{b_i a_j}{\delta}\Big),

    the tensor's part of ``(1 / 2) log det(H + delta I) - (P / 2) log delta``. With the prior
    terms ``delta ||theta||^2 / 2`` they split the negative log marginal likelihood:
    ``-log p(D) = -log p(D | theta) + sum_t (delta_t ||theta_t||^2 / 2 + o_t)``. A path that
    is off in the evidence pays neither (``o -> 0`` as ``delta`` outgrows its curvature).

    Args:
        la: A fitted Kronecker-factored Laplace approximation (``hessian_structure="kron"``).

    Returns:
        One ``o`` per trainable parameter tensor, in ``model.parameters()`` order (nats).

    Raises:
        TypeError: If ``la`` is not Kronecker-factored.
        AttributeError: If ``la`` has not been fitted.
    """
    return _per_tensor(la, lambda curvature, delta: 0.5 * torch.log1p(curvature / delta).sum())


def _per_tensor(
    la: KronLaplace, term: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
) -> list[float]:
    """``term(curvature eigenvalues, delta)`` of every parameter tensor's KFAC block."""
    if not isinstance(la, KronLaplace):
        raise TypeError(f"this diagnostic needs a KronLaplace, got {type(la).__name__}.")
    require_fitted(la)
    eigenvalues = kron_eigenvalues(fitted_decomposition(la) * likelihood_scale(la))
    deltas = la.prior_precision.detach().expand(len(eigenvalues))
    with torch.no_grad():
        return [
            term(values[0] if len(values) == 1 else torch.outer(values[0], values[1]), delta).item()
            for values, delta in zip(eigenvalues, deltas, strict=True)
        ]


def symmetry_report(la: KronLaplace) -> dict[str, Any]:
    """A plain, JSON-serialisable table of the learned symmetry per layer and path.

    Args:
        la: A fitted Kronecker-factored Laplace approximation of a model with
            :class:`~laplace_equivariance.layers.RelaxedLayer` modules (those of
            :func:`laplace_equivariance.models.build`, say).

    Returns:
        ``{"layers": [{"layer", "paths": {path: {"parameters", "prior_precision",
        "squared_norm", "effective", "normalised", "relative"}}, "learned": path}, ...],
        "outside": {tensor: {"parameters", "prior_precision", "squared_norm",
        "effective"}}}``: one row per relaxed layer, its paths as the layer declares them;
        a path's ``prior_precision`` and ``squared_norm`` list one value per parameter
        tensor (the MAP weights' ``||theta||^2``). Trainable tensors outside every relaxed
        layer (a stock head) are listed under ``"outside"``, one entry each: they belong to
        no path, so they enter no layer's shares.

    Raises:
        ValueError: If ``la`` approximates only some of the model's weights (a last-layer
            Laplace: its head is in no relaxed layer's path).
    """
    gammas = effective_parameters(la)
    precisions = la.prior_precision.detach().expand(len(gammas)).tolist()
    layers: dict[str, dict[str, dict[str, Any]]] = {}
    outside: dict[str, dict[str, Any]] = {}
    weights = {n: p.detach() for n, p in la.model.named_parameters() if p.requires_grad}
    if len(gammas) != len(weights):
        raise ValueError(
            f"symmetry_report needs a Laplace approximation of every weight "
            f"(subset_of_weights='all'); this {type(la).__name__} covers {len(gammas)} of the "
            f"model's {len(weights)} parameter tensors (a last-layer Laplace covers only the "
            "head, which is in no relaxed layer's path)."
        )
    where = parameter_paths(la.model)
    for name, gamma, precision in zip(weights, gammas, precisions, strict=True):
        weight = weights[name]
        place = where[name]
        if place is None:
            outside[name] = {
                "parameters": weight.numel(),
                "prior_precision": precision,
                "squared_norm": weight.square().sum().item(),
                "effective": gamma,
            }
            continue
        layer, path = place
        entry = layers.setdefault(layer, {}).setdefault(
            path, {"parameters": 0, "prior_precision": [], "squared_norm": [], "effective": 0.0}
        )
        entry["parameters"] += weight.numel()
        entry["prior_precision"].append(precision)
        entry["squared_norm"].append(weight.square().sum().item())
        entry["effective"] += gamma
    rows = []
    for layer, paths in layers.items():
        for entry in paths.values():
            entry["normalised"] = entry["effective"] / entry["parameters"]
        total = sum(entry["normalised"] for entry in paths.values())
        for entry in paths.values():
            entry["relative"] = entry["normalised"] / total if total > 0 else 0.0
        learned = max(paths, key=lambda p: paths[p]["relative"])
        rows.append({"layer": layer, "paths": paths, "learned": learned})
    return {"layers": rows, "outside": outside}


def _on_layer_inputs(
    model: nn.Module,
    x: torch.Tensor,
    batch_size: int,
    measure: Callable[[str, RelaxedLayer, torch.Tensor], None],
    caller: str,
) -> list[str]:
    """Call ``measure(name, layer, input)`` for every relaxed layer on each batch of ``x``.

    The model runs forward without gradients, batch by batch; ``measure`` sees each relaxed
    layer's input (a forward pre-hook, removed afterwards). Returns the layers' names in
    ``model.named_modules()`` order.

    Raises:
        ValueError: If the model has no relaxed layer or is in training mode, or ``x`` is
            empty (``caller`` names the public function in the messages).
    """
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, RelaxedLayer)]
    if not layers:
        raise ValueError(
            f"{type(model).__name__} has no RelaxedLayer: {caller} measures the paths of "
            "relaxed layers (laplace_equivariance.models.build makes such models)."
        )
    if len(x) == 0:
        raise ValueError(f"{caller} needs at least one input.")
    if model.training:
        raise ValueError(
            f"{caller} measures a model in evaluation mode (in training mode dropout draws and "
            "batch norm updates its running statistics): call model.eval() first."
        )

    def hook_of(name: str, layer: RelaxedLayer):
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            measure(name, layer, inputs[0])

        return hook

    handles = [layer.register_forward_pre_hook(hook_of(n, layer)) for n, layer in layers]
    try:
        with torch.no_grad():
            for batch in x.split(batch_size):
                model(batch)
    finally:
        for handle in handles:
            handle.remove()
    return [name for name, _ in layers]


def path_output_shares(
    model: nn.Module, x: torch.Tensor, batch_size: int = 256
) -> list[dict[str, Any]]:
    """Each path's share of its relaxed layer's output energy on inputs ``x``.

    Args:
        model: A model with :class:`~laplace_equivariance.layers.RelaxedLayer` modules, in
            evaluation mode (``model.eval()``).
        x: Inputs, shape ``(N, *in_shape)``, on the model's device.
        batch_size: Examples per forward pass.

    Returns:
        ``[{"layer": name, "paths": {path: share}}, ...]``, one row per relaxed layer in
        ``model.named_modules()`` order; a layer's shares sum to one (see the module
        docstring for the formula).

    Raises:
        ValueError: If the model has no relaxed layer or is in training mode, ``x`` is empty,
            or a layer's paths all give zero outputs on ``x`` (no share is defined).
    """
    energy: dict[str, dict[str, float]] = {}

    def measure(name: str, layer: RelaxedLayer, h: torch.Tensor) -> None:
        paths = energy.setdefault(name, dict.fromkeys(layer.path_names, 0.0))
        for path, term in layer.path_outputs(h).items():
            paths[path] += term.double().square().sum().item()

    rows = []
    for name in _on_layer_inputs(model, x, batch_size, measure, "path_output_shares"):
        paths = energy[name]
        total = sum(paths.values())
        if total == 0:
            raise ValueError(f"Every path of {name} gives zero output on these inputs.")
        rows.append({"layer": name, "paths": {p: e / total for p, e in paths.items()}})
    return rows


def path_shift_errors(
    model: nn.Module, x: torch.Tensor, shift: tuple[int, int], batch_size: int = 256
) -> list[dict[str, Any]]:
    r"""How far each path of each relaxed layer is from equivariant to one circular shift.

    A path computes ``y_p`` on its layer's input ``h``; with ``S`` the circular shift of the
    network's input by ``shift = (dy, dx)`` pixels, ``S_l`` the same shift scaled to layer
    ``l``'s input grid and ``S'_l`` to its output grid, the path's relative equivariance
    error on inputs ``x`` is

    .. math::
        e_p = \frac{\sum_n \lVert y_p(S_l h_n) - S'_l y_p(h_n) \rVert^2}
                     {\sum_n \lVert y_p(h_n) \rVert^2},

    with ``h_n`` the layer's input for example ``n`` in the trained network. ``e_p = 0``: the
    path commutes with that shift on these data (a circular CONV path with per-example
    polyphase subsampling does, for a shift the layer's subsampling divides; so does an F-FC
    path whose maps are constant over positions, a global pooling); ``e_p`` near 2: the
    shifted input's output is unrelated to the shifted output. For quadrant tasks (paper
    Table 1) a shift by half the image moves a digit to another quadrant: paths with small
    errors treat the quadrants alike, whichever path type they are.

    Args:
        model: A model with :class:`~laplace_equivariance.layers.RelaxedLayer` modules on
            image grids, in evaluation mode.
        x: Inputs ``(N, C, H, W)`` on the model's device.
        shift: ``(dy, dx)`` in input pixels; each layer's input and output grid must divide
            it evenly (``dy * H_l / H`` an integer), except a grid one pixel long on that axis
            (a layer that pools to 1x1), where the shift is none and the error measures
            invariance.
        batch_size: Examples per forward pass.

    Returns:
        ``[{"layer": name, "paths": {path: e_p or None}, "total": e}, ...]`` in
        ``model.named_modules()`` order, ``e`` the same error of the paths' sum (the layer's
        output before its ``1 / sqrt(K)``); ``None`` where the output is zero on ``x`` (no
        error is defined).

    Raises:
        ValueError: If the model has no relaxed layer or is in training mode, ``x`` or a
            relaxed layer's input is not a non-empty batch of images, the shift is a multiple
            of the image size on both axes (the identity), or a layer's grid does not divide
            the shift.
    """
    if x.dim() != 4:
        raise ValueError(
            f"path_shift_errors needs a batch of images (N, C, H, W), got {tuple(x.shape)}."
        )
    height, width = x.shape[-2:]
    if shift[0] % height == 0 and shift[1] % width == 0:
        raise ValueError(
            f"The shift {tuple(shift)} of a {height}x{width} input is a multiple of the image "
            "size: a circular shift by it is the identity, under which every network is "
            "equivariant. Use a shift that is not a multiple of the grid size (e.g. half the "
            f"image, ({height // 2}, {width // 2}))."
        )
    sums: dict[str, dict[str, list[float]]] = {}

    def scaled(size: Sequence[int], name: str, where: str) -> tuple[int, int]:
        # a grid one pixel long on an axis has no shift there: equivariance is invariance
        dy = shift[0] * size[0] / height if size[0] > 1 else 0.0
        dx = shift[1] * size[1] / width if size[1] > 1 else 0.0
        if not (dy.is_integer() and dx.is_integer()):
            raise ValueError(
                f"The shift {tuple(shift)} of a {height}x{width} input is {dy}, {dx} pixels on "
                f"the {size[0]}x{size[1]} {where} grid of {name}: choose a shift that every "
                "layer's grid divides (a multiple of the network's total subsampling)."
            )
        return int(dy), int(dx)

    def measure(name: str, layer: RelaxedLayer, h: torch.Tensor) -> None:
        if h.dim() != 4:
            raise ValueError(
                f"{name} takes inputs of shape {tuple(h.shape)}, not image grids (N, C, H, W): "
                "path_shift_errors shifts grids, so it measures relaxed layers on images only."
            )
        paths = sums.setdefault(name, {p: [0.0, 0.0] for p in [*layer.path_names, "total"]})
        moved = torch.roll(h, scaled(h.shape[-2:], name, "input"), dims=(-2, -1))
        plain, shifted = layer.path_outputs(h), layer.path_outputs(moved)
        plain["total"] = functools.reduce(operator.add, plain.values())
        shifted["total"] = functools.reduce(operator.add, shifted.values())
        for path, y in plain.items():
            expected = torch.roll(y, scaled(y.shape[-2:], name, "output"), dims=(-2, -1))
            paths[path][0] += (shifted[path] - expected).double().square().sum().item()
            paths[path][1] += y.double().square().sum().item()

    rows = []
    for name in _on_layer_inputs(model, x, batch_size, measure, "path_shift_errors"):
        errors = {p: (e / n if n > 0 else None) for p, (e, n) in sums[name].items()}
        rows.append({"layer": name, "total": errors.pop("total"), "paths": errors})
    return rows


def plot_symmetry(report: dict[str, Any], title: str | None = None) -> Figure:
    """Stacked bars of each path's relative effective parameters per layer (as Fig. 3).

    Args:
        report: The output of :func:`symmetry_report`.
        title: Figure title.

    Returns:
        The figure.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib import pyplot as plt

    rows = report["layers"]
    paths = sorted({path for row in rows for path in row["paths"]})
    figure, axis = plt.subplots(figsize=(1.0 + 0.6 * len(rows), 3.0))
    bottom = [0.0] * len(rows)
    for path in paths:
        shares = [row["paths"].get(path, {}).get("relative", 0.0) for row in rows]
        axis.bar([row["layer"] for row in rows], shares, bottom=bottom, label=path.upper())
        bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
    axis.set_ylabel("relative effective\nparameters")
    axis.set_ylim(0, 1)
    axis.tick_params(axis="x", rotation=45)
    axis.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        axis.set_title(title)
    figure.tight_layout()
    return figure
