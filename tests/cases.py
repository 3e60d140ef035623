"""Shared test cases: every registered path kind, in every test that a path kind needs.

As curvlinops' ``cases.py``: the tests iterate these cases instead of writing one test per
layer, so a path kind added here is tested by all of them at once:

- :func:`path_cases` (built from the registry): each kind as a first and as an inner layer,
  for the equivariance tests (``tests/layers/test_equivariance.py``);
- :data:`KIND_CASES`, one entry a kind: its rule cases (modules before a ReLU and a linear
  head, with the formula of every parameter's factors evaluated literally,
  ``tests/curvature/rules/test_rules.py``), where its KFAC equals the exact GGN, and a general
  case with the pinned error of each inexact block (``tests/curvature/test_exactness.py``).
  A registered kind without them fails ``tests/layers/test_path_kinds.py``;
- :func:`relaxed_layer_inputs`: the paper's relaxed layers with their inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from laplace_equivariance import models
from laplace_equivariance.layers import (
    N_ROTATIONS,
    PATH_KINDS,
    CircularConv2d,
    FactoredLinear2d,
    FullyConnected2d,
    P4GroupConv2d,
    P4LiftingConv2d,
    P4PointwiseConv2d,
    PathGeometry,
    RelaxedLayer,
    SparseCircularConv2d,
    SparseFactoredLinear2d,
)
from tests.curvature.reference import capture, exact_ggn_torch_func, parameter_slices


@dataclass(frozen=True)
class PathCase:
    """A path kind built at one place of a network: first layer (lifting) or inside."""

    kind: str
    lifting: bool

    @property
    def id(self) -> str:
        return f"{self.kind}-{'first' if self.lifting else 'inner'}"

    def build(self, size: int = 8) -> nn.Module:
        kind = PATH_KINDS[self.kind]
        channels = 2 if self.lifting else 2 * N_ROTATIONS  # p4 maps: four rotations each
        return kind.build(PathGeometry(channels, 2 * N_ROTATIONS, size, size, self.lifting))

    def inputs(self, n: int = 3, size: int = 8) -> torch.Tensor:
        channels = 2 if self.lifting else 2 * N_ROTATIONS
        return torch.randn(n, channels, size, size, dtype=torch.float64)


def path_cases() -> list[PathCase]:
    """Every registered kind, as the first layer and as an inner one."""
    return [PathCase(kind, lifting) for kind in PATH_KINDS for lifting in (True, False)]


def relaxed_layer_inputs(name: str, n: int = 3) -> list[tuple[str, RelaxedLayer, torch.Tensor]]:
    """Each relaxed layer of the paper's model ``name`` (alpha 1, float64) with its inputs."""
    torch.manual_seed(0)
    model = models.build(name, (1, 32, 32), 3, alpha=1).double()
    captured: list[tuple[str, RelaxedLayer, torch.Tensor]] = []
    handles = [
        layer.register_forward_pre_hook(
            lambda module, args, name=layer_name: captured.append((name, module, args[0]))
        )
        for layer_name, layer in model.named_children()
        if isinstance(layer, RelaxedLayer)
    ]
    with torch.no_grad():
        model(torch.randn(n, 1, 32, 32, dtype=torch.float64))
    for handle in handles:
        handle.remove()
    return captured


# ---------------------------------------------------------------------------------------------
# KFAC rules and exactness: what each path kind's modules must give, evaluated literally.

RULE_EXAMPLES, RULE_CLASSES = 5, 4
"""``N`` and ``K`` of the rule cases."""


class Brute:
    """A rule case's model and inputs (float64), and the literal references a formula reads.

    ``capture(module)``: the module's input and per-example ``G_n = J_n^T Lambda_n J_n`` over
    its flattened output (torch.func); ``exact_block(name)``: the parameter's exact GGN block.
    """

    def __init__(self, model: nn.Sequential, x: torch.Tensor, approximation: str):
        self.model, self.x, self.approximation = model, x, approximation
        self.n = len(x)

    def capture(self, module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        return capture(module, self.model, self.x)

    @functools.cached_property
    def _ggn(self) -> torch.Tensor:
        return exact_ggn_torch_func(self.model, self.x, "classification")

    def exact_block(self, name: str) -> torch.Tensor:
        s = parameter_slices(self.model)[name]
        return self._ggn[s, s]


Formula = Callable[[Brute], dict[str, list[torch.Tensor]]]


@dataclass(frozen=True)
class RuleCase:
    """Modules of a path kind before a ReLU and a linear head, and the factors of their rules.

    ``formula`` returns, for every trainable parameter before the head, the factors the fit
    must give under ``brute.approximation``: ``[B, A]`` (``A`` divided by ``N``, as
    laplace-torch) of a Kronecker-factored weight, ``[block]`` for any other parameter.
    """

    name: str
    layers: Callable[[], list[nn.Module]]
    in_shape: tuple[int, ...]
    formula: Formula

    def model(self) -> nn.Sequential:
        layers = self.layers()
        with torch.no_grad():
            features = nn.Sequential(*layers)(torch.zeros(1, *self.in_shape)).numel()
        return nn.Sequential(*layers, nn.ReLU(), nn.Flatten(), nn.Linear(features, RULE_CLASSES))


class ExactCase(NamedTuple):
    """Where KFAC equals the exact GGN: ``Sequential(make(), Flatten())`` on ``n`` examples."""

    make: Callable[[], nn.Module]
    in_shape: tuple[int, ...]
    n: int


class GeneralCase(NamedTuple):
    """One layer, a ReLU and a linear head on 8 examples (seed 0, 3 classes), with the
    relative Frobenius error of each inexact Kron block (docs/curvature.md lists them)."""

    make: Callable[[], nn.Module]
    in_shape: tuple[int, ...]
    pinned: dict[str, float]


@dataclass(frozen=True)
class KindCases:
    """A path kind's cases: its rules' formulas, and where its KFAC is exact or how far off."""

    rules: tuple[RuleCase, ...]
    exact: dict[str, ExactCase] = field(default_factory=dict)
    general: GeneralCase | None = None


def circular_patches(x: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """Patches of the circularly padded map by ``F.pad`` and ``F.unfold``, ``(N, C S^2, XY)``."""
    p = kernel_size // 2
    return F.unfold(F.pad(x, (p, p, p, p), mode="circular"), kernel_size)


def shared_weight(rows: torch.Tensor, G: torch.Tensor, approximation: str) -> list[torch.Tensor]:
    """``[B, A]`` of a weight that multiplies ``R`` rows ``(N, R, D)`` per example, with ``G``
    over its output as ``(N, C', R, C', R)``: expand ``A = (1/RN) sum a a^T``, ``B`` summed over
    the uses; reduce ``A`` from the mean row, ``B`` from the summed gradient."""
    n, r, _ = rows.shape
    if approximation == "reduce":
        mean = rows.mean(dim=1)
        return [G.sum(dim=(0, 2, 4)), mean.T @ mean / n]
    flat = rows.reshape(n * r, -1)
    return [torch.einsum("norpr->op", G), flat.T @ flat / (r * n)]


def fully_connected(brute: Brute) -> dict[str, list[torch.Tensor]]:
    inputs, G = brute.capture(brute.model[0])
    a = inputs.flatten(1)
    return {"0.weight": [G.sum(0), a.T @ a / brute.n], "0.bias": [G.sum(0)]}


def factored(brute: Brute) -> dict[str, list[torch.Tensor]]:
    """F-FC: ``theta2``'s ``A`` per input channel, ``theta1``'s per output channel."""
    layer, n = brute.model[0], brute.n
    x_in, G_h = brute.capture(layer.input_map)  # G_h over h(c', c)
    h, G_y = brute.capture(layer.output_map)  # G_y over y(c', q)
    (c_out, c), x_in = h.shape[1:], x_in.flatten(2)
    q = G_y.shape[1] // c_out
    G_y = G_y.view(n, c_out, q, c_out, q)
    return {
        "0.input_map.weight": [
            torch.einsum("nocpc->op", G_h.view(n, c_out, c, c_out, c)),
            torch.einsum("ncp,ncq->cpq", x_in, x_in) / (c * n),
        ],
        "0.output_map.weight": [
            torch.einsum("noqor->qr", G_y),
            torch.einsum("noc,nod->ocd", h, h) / (c_out * n),
        ],
        "0.output_map.channel_bias": [G_y.sum((0, 2, 4))],
        "0.output_map.position_bias": [G_y.sum((0, 1, 3))],
    }


SPARSE_EXACT_BLOCKS = tuple(
    f"0.{name}"
    for name in (
        "input_map.basis.position_offsets",
        "input_map.basis.lengthscale",
        "output_map.basis.position_offsets",
        "output_map.basis.lengthscale",
        "output_map.channel_bias",
        "output_map.position_bias",
    )
)


def sparse_factored(brute: Brute) -> dict[str, list[torch.Tensor]]:
    """S-FC: F-FC's factors projected on the bases; biases and bases' parameters exact."""
    layer = brute.model[0]
    phi2, phi1 = layer.input_map.basis().detach(), layer.output_map.basis().detach()
    x_in, _ = brute.capture(layer.input_map)
    x_tilde = torch.einsum("ncp,pj->ncj", x_in.flatten(2), phi2)
    dense = factored(brute)
    (b2, _), (b1, a1) = dense["0.input_map.weight"], dense["0.output_map.weight"]
    return {
        "0.input_map.weight": [
            b2,
            torch.einsum("ncj,nck->cjk", x_tilde, x_tilde) / (x_tilde.shape[1] * brute.n),
        ],
        "0.output_map.weight": [phi1.T @ b1 @ phi1, a1],
        **{name: [brute.exact_block(name)] for name in SPARSE_EXACT_BLOCKS},
    }


def position_factors(brute: Brute, rows: torch.Tensor, G: torch.Tensor):
    """``[B, A]`` and the bias block of a convolution ``model[0]`` whose filter multiplies
    ``rows`` ``(N, XY, D)``, one a position; ``G`` over its output ``(C', X, Y)``."""
    c_out, positions = brute.model[0].out_channels, rows.shape[1]
    uses = G.view(brute.n, c_out, positions, c_out, positions)
    B, A = shared_weight(rows, uses, brute.approximation)
    return {"0.weight": [B, A], "0.bias": [B]}


def circular_conv(brute: Brute) -> dict[str, list[torch.Tensor]]:
    layer = brute.model[0]
    inputs, G = brute.capture(layer)
    return position_factors(brute, circular_patches(inputs, layer.kernel_size).transpose(1, 2), G)


def sparse_conv(brute: Brute) -> dict[str, list[torch.Tensor]]:
    """S-CONV: CONV's patches projected on the basis; the basis' parameters exact."""
    layer = brute.model[0]
    inputs, G = brute.capture(layer)
    n, c, positions = len(inputs), layer.in_channels, inputs[0, 0].numel()
    patches = circular_patches(inputs, layer.kernel_size).view(n, c, -1, positions)
    projected = torch.einsum("ncsp,sj->ncjp", patches, layer.basis().detach())
    rows = projected.reshape(n, -1, positions).transpose(1, 2)
    exact = ("0.basis.position_offsets", "0.basis.lengthscale")
    return {
        **position_factors(brute, rows, G),
        **{name: [brute.exact_block(name)] for name in exact},
    }


def p4_factors(brute: Brute, index: int, rows: torch.Tensor, G: torch.Tensor):
    """``[B, A]`` and the bias block of the p4 module ``model[index]`` (rows over its ``4 XY``
    uses per example; ``G`` over its rotation-major output)."""
    n, c_out, r = brute.n, brute.model[index].out_channels, rows.shape[1]
    uses = G.view(n, N_ROTATIONS, c_out, r // 4, N_ROTATIONS, c_out, r // 4)
    uses = uses.permute(0, 2, 1, 3, 5, 4, 6).reshape(n, c_out, r, c_out, r)
    B, A = shared_weight(rows, uses, brute.approximation)
    return {f"{index}.weight": [B, A], f"{index}.bias": [B]}


def p4_rotated_back(brute: Brute, index: int) -> dict[str, list[torch.Tensor]]:
    """Lifting or pointwise p4 convolution: ``conv(x, rot^s psi) = rot^s conv(rot^-s x, psi)``,
    so the filter's rows at output rotation ``s`` are plain patches of the back-rotated map."""
    module = brute.model[index]
    inputs, G = brute.capture(module)
    n, c_in, size = brute.n, module.in_channels, inputs.shape[-2:]
    per_rotation = (
        inputs.view(n, N_ROTATIONS, c_in, *size)
        if isinstance(module, P4PointwiseConv2d)
        else inputs[:, None].expand(n, N_ROTATIONS, c_in, *size)
    )
    rows = torch.cat(
        [
            circular_patches(back, module.kernel_size).transpose(1, 2)
            for back in (torch.rot90(per_rotation[:, s], -s, (-2, -1)) for s in range(N_ROTATIONS))
        ],
        dim=1,
    )
    return p4_factors(brute, index, rows, G)


def p4_read_off(brute: Brute, index: int) -> dict[str, list[torch.Tensor]]:
    """Full p4 convolution: the row that multiplies the filter at each output rotation and
    position read off by autograd (``d y(c'=0, s, p) / d psi(0)``), independently of the
    rule's cycling and turning."""
    layer = brute.model[index]
    inputs, G = brute.capture(layer)

    def first_output_channel(weight):
        out = torch.func.functional_call(layer, {"weight": weight, "bias": layer.bias}, inputs)
        return out.view(brute.n, N_ROTATIONS, layer.out_channels, -1)[:, :, 0]

    jacobian = torch.func.jacrev(first_output_channel)(layer.weight.detach())
    rows = jacobian[..., 0, :, :, :].reshape(brute.n, -1, layer.weight[0].numel())
    return p4_factors(brute, index, rows, G)


def p4_lifting(brute: Brute) -> dict[str, list[torch.Tensor]]:
    return p4_rotated_back(brute, 0)


def p4_after(second: Callable[[Brute, int], dict]) -> Formula:
    """A lifting convolution, a ReLU and a p4 convolution: both modules' factors."""
    return lambda brute: {**p4_rotated_back(brute, 0), **second(brute, 2)}


FACTORED_SHAPES = {
    # (C, C', input grid, output grid, Q)
    "direct": (2, 3, 4, 2, 4),
    # few output positions, many input channels: the input map's B through the output map
    "through-output-map-1x1": (8, 3, 4, 1, 1),
    "through-output-map-1x2": (24, 3, 2, (1, 2), 2),
}


def factored_cases(layer: type[nn.Module], formula: Formula) -> tuple[RuleCase, ...]:
    return tuple(
        RuleCase(name, lambda c=c, cp=cp, g=g, o=o: [layer(c, cp, g, o)], (c, g, g), formula)
        for name, (c, cp, g, o, _) in FACTORED_SHAPES.items()
    )


CONV_SHAPES = {
    "4x4-k3": ((4, 4), 3),
    "2x2-k3-pad-wraps-twice": ((2, 2), 3),
    "3x5-k5": ((3, 5), 5),
    "4x4-k1": ((4, 4), 1),
    "8x8-k3-B-by-batched-grams": ((8, 8), 3),
}


EXACTNESS_CLASSES = 3
"""``K`` of the exact and general cases."""


def p4_pair(second: type[nn.Module]) -> Callable[[], list[nn.Module]]:
    return lambda: [P4LiftingConv2d(2, 3, 3, size=4), nn.ReLU(), second(3, 2, 3, size=4)]


def factored_kind(layer: type[nn.Module], formula: Formula, pinned: tuple[float, float]):
    """F-FC or S-FC: exact with one input and one output channel."""
    return KindCases(
        factored_cases(layer, formula),
        exact={
            "one-channel": ExactCase(
                lambda: layer(1, 1, (3, 2), (1, EXACTNESS_CLASSES)), (1, 3, 2), 1
            )
        },
        general=GeneralCase(
            lambda: layer(2, 2, 2, 2),
            (2, 2, 2),
            dict(zip(("0.input_map.weight", "0.output_map.weight"), pinned, strict=True)),
        ),
    )


def convolution_kind(layer: type[nn.Module], rules: tuple[RuleCase, ...], pinned):
    """CONV or S-CONV: exact on a 1x1 grid (a single output position). The bias of a
    weight-shared layer is a sum over positions: KFAC-expand's bias block is not its exact GGN
    block either, so it is pinned too."""
    return KindCases(
        rules,
        exact={"1x1-grid": ExactCase(lambda: layer(2, EXACTNESS_CLASSES, 3, size=1), (2, 1, 1), 1)},
        general=GeneralCase(
            lambda: layer(2, 2, 3, size=2),
            (2, 2, 2),
            dict(zip(("0.weight", "0.bias"), pinned, strict=True)),
        ),
    )


KIND_CASES: dict[str, KindCases] = {
    "fc": KindCases(
        (RuleCase("", lambda: [FullyConnected2d(2, 3, 4, 2)], (2, 4, 4), fully_connected),),
        exact={
            "one-example": ExactCase(
                lambda: FullyConnected2d(2, 1, (2, 2), (1, EXACTNESS_CLASSES)), (2, 2, 2), 1
            )
        },
        general=GeneralCase(lambda: FullyConnected2d(2, 2, 2, 2), (2, 2, 2), {"0.weight": 0.7534}),
    ),
    "f-fc": factored_kind(FactoredLinear2d, factored, (0.7839, 0.8425)),
    "s-fc": factored_kind(SparseFactoredLinear2d, sparse_factored, (0.7504, 0.7348)),
    "conv": convolution_kind(
        CircularConv2d,
        tuple(
            RuleCase(
                name,
                lambda s=size, k=k: [CircularConv2d(2, 3, k, size=s)],
                (2, *size),
                circular_conv,
            )
            for name, (size, k) in CONV_SHAPES.items()
        ),
        (0.8474, 0.3888),
    ),
    "s-conv": convolution_kind(
        SparseCircularConv2d,
        (RuleCase("", lambda: [SparseCircularConv2d(2, 3, 3, size=4)], (2, 4, 4), sparse_conv),),
        (1.0698, 0.6788),
    ),
    "gconv": KindCases(
        (
            RuleCase("lifting", lambda: [P4LiftingConv2d(2, 3, 3, size=4)], (2, 4, 4), p4_lifting),
            RuleCase("pointwise", p4_pair(P4PointwiseConv2d), (2, 4, 4), p4_after(p4_rotated_back)),
        ),
        general=GeneralCase(
            lambda: P4LiftingConv2d(2, 1, 3, size=2),
            (2, 2, 2),
            {"0.weight": 0.5584, "0.bias": 0.1254},
        ),
    ),
    "gconv-full": KindCases(
        (RuleCase("", p4_pair(P4GroupConv2d), (2, 4, 4), p4_after(p4_read_off)),),
        general=GeneralCase(
            lambda: P4GroupConv2d(2, 1, 3, size=2),
            (4 * 2, 2, 2),  # a p4 map of 2 channels
            {"0.weight": 0.7783, "0.bias": 0.6941},
        ),
    ),
}
"""Path kind -> its cases. Every registered kind needs rule cases that reach each of its
module classes, and an exact or a general case (tests/layers/test_path_kinds.py)."""


def rule_cases() -> dict[str, RuleCase]:
    """Every kind's rule cases, by ``kind-name`` (``kind`` alone for a case without a name)."""
    return {
        f"{kind}-{case.name}" if case.name else kind: case
        for kind, cases in KIND_CASES.items()
        for case in cases.rules
    }


def exact_cases() -> dict[str, ExactCase]:
    """Every kind's exact cases, by ``kind-name``."""
    return {
        f"{kind}-{name}": case
        for kind, cases in KIND_CASES.items()
        for name, case in cases.exact.items()
    }


def general_cases() -> dict[str, GeneralCase]:
    """Every kind's general case, by kind."""
    return {kind: cases.general for kind, cases in KIND_CASES.items() if cases.general}


def kinds_without_cases() -> list[str]:
    """Registered kinds lacking a rule case or an exact or general case."""
    return [
        kind
        for kind in PATH_KINDS
        if kind not in KIND_CASES
        or not KIND_CASES[kind].rules
        or not (KIND_CASES[kind].exact or KIND_CASES[kind].general is not None)
    ]
