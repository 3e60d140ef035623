r"""Relax your own network: its convolutions become relaxed layers, and fold back after training.

:func:`relax` turns each selected ``nn.Conv2d`` of any network (a torchvision ResNet, a VGG,
your own CNN; strides, dilations, groups and padding, of any ``padding_mode``, as they are:
:class:`~laplace_equivariance.EquivariantKFAC` has a rule for every ``nn.Conv2d``,
:mod:`laplace_equivariance.curvature.rules.stock_conv`) into a
:class:`~laplace_equivariance.layers.RelaxedLayer` whose CONV path *is* that convolution (the
same module, weights and all) plus non-equivariant paths (F-FC by default, paper Eq. 5) that
map the convolution's input grid onto its output grid:

.. math::
    y = \mathrm{conv}(x) + \sum_{k} f_k(x), \qquad f_k \text{ started at zero,}

so the relaxed network computes exactly what the original did until training moves the new
paths (the plain sum, not the paper's sum over :math:`\sqrt K`, for that reason). Each path
gets its own prior through the parameter names (``layer1.0.conv1.conv.weight``,
``layer1.0.conv1.fc.input_map.weight``), as in the paper's models, so
:func:`~laplace_equivariance.marglik_training` learns per layer whether the new paths are
needed, and :class:`~laplace_equivariance.EquivariantKFAC`,
:func:`~laplace_equivariance.symmetry_report` and
:func:`~laplace_equivariance.path_output_shares` work on the result unchanged.

The grids come from one forward pass of ``example_input``; the parameters every path would
add are counted on the ``meta`` device before anything is allocated, and a relaxation above
``max_added_parameters`` is refused, naming the largest layers and the cheaper S-FC.

:func:`fold` is the way back for deployment: every relaxed layer whose non-equivariant paths
carry less than ``threshold`` of its output energy on data becomes its plain convolution.
Dropping paths of output-energy share :math:`s` changes that layer's output by a relative
:math:`\|\Delta y\| / \|y\| \le \sqrt{s} / (1 - \sqrt{s})` (triangle inequality on the
measured data), so a small threshold keeps the predictions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from laplace_equivariance.diagnostics import path_output_shares
from laplace_equivariance.layers import (
    FactoredLinear2d,
    FullyConnected2d,
    RelaxedLayer,
    SparseFactoredLinear2d,
)

__all__ = [
    "DEFAULT_MAX_ADDED_PARAMETERS",
    "RELAXATION_PATHS",
    "ConvSite",
    "fold",
    "relax",
    "relaxation_plan",
]

DEFAULT_MAX_ADDED_PARAMETERS = 20_000_000
"""The most parameters :func:`relax` adds unless told otherwise (about 80 MB in float32)."""

RELAXATION_PATHS: dict[str, tuple[str, Callable[..., nn.Module]]] = {
    "f-fc": ("fc", FactoredLinear2d),
    "s-fc": ("fc", SparseFactoredLinear2d),
    "fc": ("fc", FullyConnected2d),
}
"""Path kind -> (its path name in the relaxed layer, its module ``(C, C', in_grid, out_grid)``)."""

LayerSelection = Sequence[str] | Callable[[str, nn.Conv2d], bool] | None


@dataclass(frozen=True)
class ConvSite:
    """One convolution of a network as :func:`relax` sees it.

    Attributes:
        name: The module's name in ``model.named_modules()``.
        in_shape: ``(C, X, Y)`` of its input on the example.
        out_shape: ``(C', X', Y')`` of its output.
        added: Path kind -> the parameters that path would add.
    """

    name: str
    in_shape: tuple[int, int, int]
    out_shape: tuple[int, int, int]
    added: dict[str, int]


def _check_paths(paths: Sequence[str]) -> None:
    unknown = [p for p in paths if p not in RELAXATION_PATHS]
    if unknown or not paths:
        raise ValueError(
            f"relax adds paths of the kinds {list(RELAXATION_PATHS)}; got {list(paths)}."
        )
    names = [RELAXATION_PATHS[p][0] for p in paths]
    if len(set(names)) < len(names):
        raise ValueError(
            f"paths={list(paths)} would give two paths the name 'fc': choose one FC kind."
        )


def _selected(model: nn.Module, layers: LayerSelection) -> list[tuple[str, nn.Conv2d]]:
    """The convolutions to relax, checked; ``layers`` by name, predicate, or all."""
    convs = {n: m for n, m in model.named_modules() if type(m) is nn.Conv2d}
    if layers is None:
        chosen = list(convs.items())
    elif callable(layers):
        chosen = [(n, m) for n, m in convs.items() if layers(n, m)]
    else:
        missing = [n for n in layers if n not in convs]
        if missing:
            raise ValueError(
                f"layers names {missing}, which are not nn.Conv2d modules of the model; its "
                f"convolutions are {list(convs)}."
            )
        chosen = [(n, convs[n]) for n in layers]
    if not chosen:
        raise ValueError("The model has no nn.Conv2d to relax (or layers selects none).")
    return chosen


def _shapes(model: nn.Module, example_input, names: list[str]) -> dict[str, tuple]:
    """Each named module's input and output shape (without the batch) on one forward pass."""
    shapes: dict[str, tuple] = {}

    def hook_of(name: str):
        def hook(module, inputs, output) -> None:
            shapes.setdefault(name, (tuple(inputs[0].shape[1:]), tuple(output.shape[1:])))

        return hook

    handles = [model.get_submodule(n).register_forward_hook(hook_of(n)) for n in names]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(example_input)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    unused = [n for n in names if n not in shapes]
    if unused:
        raise ValueError(f"{unused} did not run on example_input; relax only what the model uses.")
    return shapes


def _path(kind: str, in_shape: tuple, out_shape: tuple) -> nn.Module:
    """A new path of ``kind`` from the input grid onto the output grid."""
    module = RELAXATION_PATHS[kind][1]
    return module(in_shape[0], out_shape[0], in_shape[1:], out_shape[1:])


def _count(kind: str, in_shape: tuple, out_shape: tuple) -> int:
    """The parameters a path would add, counted on the meta device (nothing allocated)."""
    with torch.device("meta"):
        return sum(p.numel() for p in _path(kind, in_shape, out_shape).parameters())


def relaxation_plan(
    model: nn.Module,
    example_input: torch.Tensor,
    paths: Sequence[str] = ("f-fc",),
    layers: LayerSelection = None,
) -> list[ConvSite]:
    """The convolutions :func:`relax` would relax, their grids and the parameters each adds.

    Args:
        model: Any network with ``nn.Conv2d`` modules.
        example_input: One batch the model takes (one example suffices).
        paths: The path kinds to add (keys of :data:`RELAXATION_PATHS`); S-FC is counted
            beside them, as the cheaper choice.
        layers: Names of convolutions, a predicate ``(name, conv) -> bool``, or None: every
            ``nn.Conv2d``.

    Returns:
        One :class:`ConvSite` per selected convolution, in module order.

    Raises:
        ValueError: For an unknown path kind, a name that is not a convolution, or a
            selected one that the example does not reach.
    """
    _check_paths(paths)
    chosen = _selected(model, layers)
    shapes = _shapes(model, example_input, [n for n, _ in chosen])
    kinds = dict.fromkeys([*paths, "s-fc"])
    sites = []
    for name, _ in chosen:
        in_shape, out_shape = shapes[name]
        added = {k: _count(k, in_shape, out_shape) for k in kinds}
        sites.append(ConvSite(name, in_shape, out_shape, added))
    return sites


def _table(sites: list[ConvSite], paths: Sequence[str]) -> str:
    """The plan as a plain-text table: layer, grids, parameters added per path kind."""
    kinds = list(dict.fromkeys([*paths, "s-fc"]))
    lines = [
        f"{'layer':28} {'in (C, X, Y)':>16} {'out (C, X, Y)':>16} "
        + " ".join(f"{'+' + k:>12}" for k in kinds)
    ]
    for site in sites:
        counts = " ".join(f"{site.added[k]:>12,}" for k in kinds)
        lines.append(f"{site.name:28} {str(site.in_shape):>16} {str(site.out_shape):>16} {counts}")
    total = " ".join(f"{sum(s.added[k] for s in sites):>12,}" for k in kinds)
    lines.append(f"{'total':28} {'':>16} {'':>16} {total}")
    return "\n".join(lines)


def relax(
    model: nn.Module,
    example_input: torch.Tensor,
    paths: Sequence[str] = ("f-fc",),
    layers: LayerSelection = None,
    max_added_parameters: int = DEFAULT_MAX_ADDED_PARAMETERS,
    dry_run: bool = False,
) -> nn.Module:
    """A copy of ``model`` whose selected convolutions are relaxed layers (see the module).

    Each selected ``nn.Conv2d`` becomes ``RelaxedLayer({"conv": conv, <path>: new, ...},
    normalise=False)``: the convolution itself (a copy with the same weights, stride,
    padding, dilation and groups) plus one new path per kind in ``paths``, started at zero
    (its last map zeroed, so that its input map can still learn), from the convolution's
    input grid to its output grid. The copy computes what ``model`` computes.

    Args:
        model: Any network with ``nn.Conv2d`` modules (left unchanged).
        example_input: One batch the model takes, on its device; its grids decide the paths'.
        paths: The non-equivariant path kinds to add: ``"f-fc"`` (default), ``"s-fc"`` or
            ``"fc"``.
        layers: Names of the convolutions to relax, a predicate ``(name, conv) -> bool``, or
            None: every ``nn.Conv2d``.
        max_added_parameters: Refuse a relaxation that would add more parameters.
        dry_run: Print the table of layers, grids and added parameters and return ``model``
            itself, relaxing nothing.

    Returns:
        The relaxed copy (or, with ``dry_run``, ``model``).

    Raises:
        ValueError: As :func:`relaxation_plan`, or if the paths would add more than
            ``max_added_parameters`` (naming the largest layers and S-FC's total).
    """
    sites = relaxation_plan(model, example_input, paths, layers)
    if dry_run:
        print(_table(sites, paths))
        return model
    added = sum(site.added[k] for site in sites for k in paths)
    if added > max_added_parameters:
        largest = sorted(sites, key=lambda s: -sum(s.added[k] for k in paths))[:3]
        sparse = sum(site.added["s-fc"] for site in sites)
        raise ValueError(
            f"Relaxing {len(sites)} convolutions with {'+'.join(paths)} adds {added:,} "
            f"parameters, above max_added_parameters={max_added_parameters:,} (largest: "
            + ", ".join(f"{s.name} {sum(s.added[k] for k in paths):,}" for s in largest)
            + f"). Relax fewer layers (layers=...), use paths=('s-fc',) ({sparse:,} in all), "
            "or raise max_added_parameters; relax(..., dry_run=True) prints every layer's cost."
        )
    relaxed = copy.deepcopy(model)
    for site in sites:
        conv = relaxed.get_submodule(site.name)
        parameter = next(conv.parameters())
        new = {
            RELAXATION_PATHS[kind][0]: _path(kind, site.in_shape, site.out_shape).to(
                device=parameter.device, dtype=parameter.dtype
            )
            for kind in paths
        }
        layer = RelaxedLayer({"conv": conv, **new}, normalise=False)
        layer.silence_(list(new), rescale=False)
        _replace(relaxed, site.name, layer)
    return relaxed


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
    """Put ``module`` where the submodule ``name`` is."""
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name), child, module)


def _is_relaxed_conv(layer: nn.Module) -> bool:
    return (
        isinstance(layer, RelaxedLayer)
        and not layer.normalise
        and "conv" in layer.path_names
        and type(layer.path("conv")) is nn.Conv2d
    )


def fold(
    model: nn.Module, x: torch.Tensor, threshold: float = 1e-3, batch_size: int = 256
) -> nn.Module:
    """A copy of a :func:`relax`-ed model in which the layers that stayed convolutional are so.

    Every relaxed convolution whose paths other than ``conv`` carry less than ``threshold``
    of its output energy on ``x`` (:func:`~laplace_equivariance.path_output_shares`)
    becomes its ``conv`` path, a plain ``nn.Conv2d``; the others stay relaxed. Where every
    layer folds, the copy has the original network's modules and cost.

    Args:
        model: A model made by :func:`relax` (trained), in evaluation mode.
        x: Inputs to measure the shares on (the test or training data), on the model's
            device.
        threshold: The largest share of the non-equivariant paths that is folded away.
        batch_size: Examples per forward pass of the measurement.

    Returns:
        The folded copy.

    Raises:
        ValueError: If ``threshold`` is not in ``[0, 1)``, or as
            :func:`~laplace_equivariance.path_output_shares` (a model in training mode, no
            relaxed layer, empty ``x``).
    """
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold is a share of the output energy in [0, 1), got {threshold}.")
    shares = {row["layer"]: row["paths"] for row in path_output_shares(model, x, batch_size)}
    folded = copy.deepcopy(model)
    for name, layer in list(folded.named_modules()):
        if name in shares and _is_relaxed_conv(layer):
            other = sum(share for path, share in shares[name].items() if path != "conv")
            if other < threshold:
                _replace(folded, name, layer.path("conv"))
    return folded
