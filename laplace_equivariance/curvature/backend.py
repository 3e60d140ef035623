"""EquivariantKFAC: a laplace-torch curvature backend for the relaxed-equivariance layers."""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import Any

import torch
from asdl.fisher import FisherConfig, get_fisher_maker
from asdl.grad_maker import LOSS_CROSS_ENTROPY, LOSS_MSE
from asdl.matrices import FISHER_EXACT, FISHER_MC, SHAPE_KRON
from laplace.baselaplace import FullLaplace, KronLaplace
from laplace.curvature import AsdlGGN
from laplace.curvature.curvature import CurvatureInterface, GGNInterface
from laplace.utils.matrix import Kron
from torch import nn

from laplace_equivariance import distributed
from laplace_equivariance.curvature.cross_entropy import ReducedRankCrossEntropyGGN
from laplace_equivariance.curvature.factor_rows import FactorRows
from laplace_equivariance.curvature.kron import BlockDiagonalKron, OuterProductJacobian
from laplace_equivariance.curvature.monte_carlo import (
    MonteCarloCrossEntropyFisher,
    MonteCarloGaussianFisher,
    check_sample_count,
)
from laplace_equivariance.curvature.projection import ProjectedFactor
from laplace_equivariance.curvature.registry import (
    device_and_dtype,
    exact_normalization_blocks,
    install_construction_check,
    install_fit_hook,
    install_kron_initialiser,
    install_predictive_chunking,
    install_state_dict_hooks,
    register_with_asdl,
)
from laplace_equivariance.curvature.rules import (
    A_ROWS_ATTR,
    EXTRA_BLOCKS_ATTR,
    KFAC_APPROXIMATIONS,
    RULES,
    UNPROJECTED_ATTR,
    kfac_approximation,
    paired_factored_maps,
)
from laplace_equivariance.curvature.rules.normalization import (
    NORMALIZATION_RULES,
    check_normalization,
)
from laplace_equivariance.layers import (
    AnchorBasis,
    FactoredInputMap,
    FactoredOutputMap,
    LengthscaleMode,
    RelaxedLayer,
)

__all__ = ["EquivariantKFAC", "UnsupportedModuleError"]

# At import, before any Laplace object exists: KronLaplace allocates its factors in __init__.
register_with_asdl()
install_kron_initialiser()
install_fit_hook()
install_state_dict_hooks()
install_predictive_chunking()
install_construction_check()

DEFAULT_MEMORY_LIMIT = 2**31
"""Bytes that :class:`EquivariantKFAC` lets a dense curvature object take (2 GiB): the
Jacobians of one chunk of examples for ``"diag"`` and ``"full"``, and the ``P x P`` Hessian
of ``"full"``. Set per approximation with ``backend_kwargs={"memory_limit": bytes}``."""


class UnsupportedModuleError(ValueError):
    """A module has trainable parameters that no KFAC rule covers."""


FISHER_MAKERS = {
    (FISHER_EXACT, LOSS_CROSS_ENTROPY): ReducedRankCrossEntropyGGN,
    (FISHER_MC, LOSS_CROSS_ENTROPY): MonteCarloCrossEntropyFisher,
    (FISHER_MC, LOSS_MSE): MonteCarloGaussianFisher,
}
"""This package's fisher maker per (ASDL fisher type, loss type); ASDL's own for the rest
(the exact GGN of a regression)."""


def _map_output_shape(module: nn.Module) -> tuple[int, ...]:
    """One example's output shape of an F-FC map: ``(C', C)`` or ``(C', X', Y')``."""
    if type(module) is FactoredInputMap:
        return (module.out_channels, module.in_channels)
    return (module.out_channels, *module.out_size)


def _stock_conv_is_exact(module: nn.Conv2d) -> bool:
    """Whether ASDL's Conv2d rule is right for ``module`` (zero padding, no groups/dilation)."""
    return (
        module.padding_mode == "zeros"
        and module.groups == 1
        and module.dilation == (1, 1)
        and not isinstance(module.padding, str)
    )


def _naming_the_batch(error: ValueError, x: torch.Tensor) -> ValueError:
    """``error`` of a layer's shape check on one example, naming the caller's whole batch.

    The output size and the per-example Jacobians run the model on one example, a batch
    ``(1, *x.shape[1:])``: the check's message would name that shape, not the batch given.
    """
    one = str((1, *x.shape[1:]))
    return ValueError(str(error).replace(f"got {one}", f"got {tuple(x.shape)}"))


def _output_size(model: nn.Module, x: torch.Tensor) -> int:
    """The model's number of outputs, from its first example (without gradients).

    Raises:
        ValueError: A layer's shape check, naming the whole batch's shape.
    """
    try:
        with torch.no_grad():
            return model(x[:1]).shape[-1]
    except ValueError as error:
        raise _naming_the_batch(error, x) from None


@contextlib.contextmanager
def _activation_graph_only(model: nn.Module):
    """Record ``model``'s forward passes without the parameters' edges in the graph.

    The factors need only the gradients with respect to each module's output; ASDL's
    backward passes (one per class for the exact GGN) would otherwise also compute every
    weight gradient and throw it away, a large part of each backward pass. While ``model``
    runs, its parameters stop requiring grad (ASDL has already chosen the modules it hooks
    by then: it requires them to need grad). A module with trainable parameters whose
    output then needs no gradient (its input does not, as in the first layer) gets a zero
    leaf that requires grad added to its output: ASDL's backward hook on that module still
    fires, and the backward passes stop there instead of computing the gradient with
    respect to the model's input (for a one-channel convolution that was the most
    expensive step of the fit).
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    owners = [
        m
        for m in model.modules()
        if not isinstance(m, AnchorBasis)
        and any(p.requires_grad for p in m.parameters(recurse=False))
    ]

    def freeze_parameters(*_):
        for p in trainable:
            p.requires_grad_(False)

    def enable_parameters(*_):
        for p in trainable:
            p.requires_grad_(True)

    def attach_to_graph(_module, _args, output):
        if not isinstance(output, torch.Tensor) or output.requires_grad:
            return None
        return output + output.new_zeros(()).requires_grad_(True)

    handles = [
        model.register_forward_pre_hook(freeze_parameters),
        model.register_forward_hook(enable_parameters),
        *(m.register_forward_hook(attach_to_graph) for m in owners),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        enable_parameters()


class EquivariantKFAC(AsdlGGN):
    """KFAC of the GGN for models built from this package's layers (and stock layers).

    Use it as any laplace-torch backend::

        Laplace(model, "classification", subset_of_weights="all",
                hessian_structure="kron", backend=EquivariantKFAC)

    Kronecker factors are computed by ASDL's fisher makers (exact GGN of a classifier:
    ``K - 1`` backward passes for ``K`` classes,
    :class:`~laplace_equivariance.curvature.cross_entropy.ReducedRankCrossEntropyGGN`; of a
    regression: one per output; ``stochastic=True``: a Monte-Carlo Fisher, ``n_mc_samples``
    backward passes, :mod:`laplace_equivariance.curvature.monte_carlo`) with
    the rules of
    :mod:`laplace_equivariance.curvature.rules` registered for the custom modules, and by
    ASDL's own rules for ``nn.Linear`` and zero-padded ``nn.Conv2d``. There is one Kron block
    per trainable parameter tensor, in ``model.parameters()`` order, so laplace-torch's
    ``prior_structure="layerwise"`` gives one prior precision per parameter tensor of every
    path and layer. Block-diagonal factors (F-FC, S-FC) are stored and eigendecomposed block
    by block (:class:`~laplace_equivariance.curvature.kron.BlockDiagonalKron`). On models of
    stock layers only, the factors equal :class:`laplace.curvature.AsdlGGN`'s.

    Jacobians (for the GLM predictive) come from ``torch.func``; ``hessian_structure="full"``
    and ``"diag"`` use laplace-torch's Jacobian-based exact GGN, on chunks of examples whose
    ``(n, K, P)`` Jacobians fit in ``memory_limit`` bytes (one example of Table 1's F-FC+CONV,
    1.75M parameters and 40 classes, takes 280 MB in float32: 128 at once would take 36 GB).
    ``"full"`` also needs the ``P x P`` Hessian itself; beyond ``memory_limit`` it is refused
    when the Laplace object is built, before anything is allocated.

    For S-layer bases whose lengthscale is a hyperparameter, :meth:`kron` also accumulates
    the statistics of the factors that the basis projects, in :attr:`projected_factors`
    (reset by :meth:`init_kron`, i.e. by every ``Laplace.fit``), for
    :func:`laplace_equivariance.lengthscales.log_marginal_likelihood`.

    Args:
        model: The network.
        likelihood: ``"classification"`` or ``"regression"``.
        last_layer: Used by laplace-torch's last-layer Laplace; warns on relaxed models.
        subnetwork_indices: As laplace-torch.
        dict_key_x: As laplace-torch.
        dict_key_y: As laplace-torch.
        stochastic: Use a Monte-Carlo Fisher (one backward pass per sample) instead of the
            exact GGN.
        n_mc_samples: Targets sampled per example for the Monte-Carlo Fisher, which is their
            average (:mod:`laplace_equivariance.curvature.monte_carlo`); ``1`` for the exact
            GGN. ``kron(..., n_mc_samples=S)`` overrides it for one batch.
        memory_limit: Bytes a dense curvature object may take (:data:`DEFAULT_MEMORY_LIMIT`).
        kfac_approx: ``"expand"`` or ``"reduce"`` for weights shared over positions.
        batched_classes: Run the exact GGN's ``K - 1`` backward passes of a classifier as one
            pass over ``K - 1`` copies of the batch (the same factors, tested; ``K - 1`` times
            the activation memory, one pass's kernel launches instead of ``K - 1`` passes').
            None (default): on when the batch is on a GPU, where the passes are bound by
            launches; on the CPU the copies' forward arithmetic costs more than it saves.

    Attributes:
        examples_seen: Examples of the current fit so far (this rank's shard in a process
            group).
        projected_factors: Parameter group -> its factor projected on a basis whose
            lengthscale is a hyperparameter, with the statistic summed over the batches
            since the last :meth:`init_kron`.

    Raises:
        UnsupportedModuleError: If a module with trainable parameters has no KFAC rule
            (an unknown custom layer, a circular or grouped ``nn.Conv2d``, a BatchNorm
            without running statistics; BatchNorm, GroupNorm and LayerNorm get exact blocks,
            :mod:`laplace_equivariance.curvature.rules.normalization`).
        ValueError: If ``n_mc_samples`` is not a positive integer, or above one without
            ``stochastic=True``, ``memory_limit`` is not positive, or ``kfac_approx`` is
            unknown or ``"reduce"`` on a model with a trainable stock ``nn.Conv2d``.
    """

    def __init__(
        self,
        model: nn.Module,
        likelihood: str,
        last_layer: bool = False,
        subnetwork_indices: torch.LongTensor | None = None,
        dict_key_x: str = "input_ids",
        dict_key_y: str = "labels",
        stochastic: bool = False,
        n_mc_samples: int = 1,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        kfac_approx: str = "expand",
        batched_classes: bool | None = None,
    ) -> None:
        check_sample_count(n_mc_samples, stochastic)
        if memory_limit <= 0:
            raise ValueError(
                f"memory_limit must be a positive number of bytes, got {memory_limit}."
            )
        if kfac_approx not in KFAC_APPROXIMATIONS:
            raise ValueError(
                f"kfac_approx must be one of {KFAC_APPROXIMATIONS}, got {kfac_approx!r}."
            )
        if kfac_approx == "reduce":
            for name, module in model.named_modules():
                if type(module) is nn.Conv2d and any(p.requires_grad for p in module.parameters()):
                    raise ValueError(
                        "kfac_approx='reduce' covers this package's weight-shared layers; the "
                        f"stock nn.Conv2d {name!r} has ASDL's KFAC-expand rule only: use "
                        "kfac_approx='expand', or a CircularConv2d."
                    )
        self.n_mc_samples = n_mc_samples
        self.memory_limit = memory_limit
        self.kfac_approx = kfac_approx
        self.batched_classes = batched_classes
        self._n_outputs: int | None = None
        super().__init__(
            model, likelihood, last_layer, subnetwork_indices, dict_key_x, dict_key_y, stochastic
        )
        # laplace-torch's Jacobian-based diag and full draw GGNInterface.num_samples targets
        self.num_samples = n_mc_samples
        if last_layer and any(
            isinstance(m, RelaxedLayer) and len(m.path_names) > 1 for m in model.modules()
        ):
            warnings.warn(
                "A last-layer Laplace approximation leaves the relaxed layers' prior "
                "precisions untouched: equivariance is only learned with "
                "subset_of_weights='all'.",
                stacklevel=2,
            )
        self._check_supported(self._model)
        self.projected_factors: dict[int, ProjectedFactor] = {}
        self.examples_seen = 0

    @staticmethod
    def _check_supported(model: nn.Module) -> None:
        """Raise for any module whose own trainable parameters no rule covers."""
        for name, module in model.named_modules():
            own = [n for n, p in module.named_parameters(recurse=False) if p.requires_grad]
            if not own or type(module) in RULES or isinstance(module, AnchorBasis):
                continue
            if type(module) in NORMALIZATION_RULES:
                if getattr(module, "track_running_stats", True) is False:
                    raise UnsupportedModuleError(
                        f"{type(module).__name__} {name!r} has no running statistics "
                        "(track_running_stats=False): it normalises every batch with the "
                        "batch's own, which couples the examples, so no per-example curvature "
                        "exists. Use GroupNorm or LayerNorm, or track running statistics."
                    )
                continue
            if type(module) is nn.Linear:
                continue
            if type(module) is nn.Conv2d and _stock_conv_is_exact(module):
                continue
            raise UnsupportedModuleError(
                f"EquivariantKFAC has no KFAC rule for module {name or '<root>'!r} "
                f"({type(module).__name__}) with trainable parameters {own}. Replace it by "
                "a supported layer (laplace_equivariance.layers, nn.Linear, zero-padded "
                "nn.Conv2d, BatchNorm, GroupNorm, LayerNorm), or freeze its parameters with "
                "requires_grad_(False)."
            )

    def _parameter_groups(self) -> list[tuple[nn.Parameter, str, nn.Module]]:
        """Every trainable parameter with its name and the module whose rule covers it."""
        owners = {}
        for name, module in self._model.named_modules():
            for pname, p in module.named_parameters(recurse=False):
                owner = module
                if isinstance(module, AnchorBasis):
                    owner = self._model.get_submodule(name.rsplit(".", 1)[0] if "." in name else "")
                    pname = f"basis.{pname}"
                owners[p] = (pname, owner)
        return [(p, *owners[p]) for p in self.params]

    def init_kron(self, device: torch.device, dtype: torch.dtype) -> Kron:
        """Zero factors with the structure :meth:`kron` returns (block-diagonal where due).

        The container is laplace-torch's own :class:`~laplace.utils.matrix.Kron`, as its own
        initialiser's: ``KronLaplace`` reads ``type(la.H) is Kron`` as "not fitted yet" and
        falls back to the prior (``log_prob``, ``log_det_posterior_precision``,
        ``log_marginal_likelihood`` of an unfitted approximation). The first batch's
        :class:`BlockDiagonalKron` added to it (``BlockDiagonalKron.__radd__``, which Python
        prefers for a subclass) makes the sum a :class:`BlockDiagonalKron`.

        Also empties :attr:`projected_factors`: ``KronLaplace.fit`` calls it before its batches.

        Args:
            device: Device of the factors.
            dtype: Their dtype.

        Returns:
            A ``Kron`` of zeros, one group per trainable parameter.
        """
        self.projected_factors = {}
        self.examples_seen = 0
        zeros = functools.partial(torch.zeros, device=device, dtype=dtype)
        kfacs = []
        for p, name, module in self._parameter_groups():
            if not self._factored_weight(name, module) or p.ndim == 1:
                kfacs.append([zeros(p.numel(), p.numel())])
                continue
            b, rest = p.shape[0], p[0].numel()
            blocks = RULES[type(module)].a_blocks(module) if type(module) in RULES else None
            a = (
                zeros(rest, rest)
                if blocks is None
                else zeros(blocks, rest // blocks, rest // blocks)
            )
            kfacs.append([zeros(b, b), a])
        return Kron(kfacs)

    def _get_kron_factors(self, N: int) -> BlockDiagonalKron:
        r"""Collect ASDL's factors and the rules' extra blocks, in parameter order, ``A / N``.

        ``A`` factors are divided by the data set size ``N`` as laplace-torch's
        ``_rescale_kron_factors`` divides them; the rows that rules leave for block-diagonal
        ``A`` factors (:data:`~laplace_equivariance.curvature.rules.A_ROWS_ATTR`) by
        :math:`\sqrt N`.
        """
        kfacs, a_rows = [], []
        for _, name, module in self._parameter_groups():
            blocks = module.__dict__.get(EXTRA_BLOCKS_ATTR, {})
            if self._factored_weight(name, module):
                stats = self._asdl_statistics(module)
                kfacs.append([stats.kron.B, stats.kron.A])
                a_rows.append(module.__dict__.get(A_ROWS_ATTR))
            elif name in self._bias_names(module):
                kfacs.append([self._asdl_statistics(module).kron.B.clone()])
                a_rows.append(None)
            elif name in blocks:
                kfacs.append([blocks[name]])
                a_rows.append(None)
            else:
                raise RuntimeError(
                    f"No curvature was computed for {type(module).__name__}'s {name!r}; is "
                    "its output used by the model's forward pass?"
                )
        for module in self._model.modules():
            module.__dict__.pop(EXTRA_BLOCKS_ATTR, None)
            module.__dict__.pop(A_ROWS_ATTR, None)
        # in place, as laplace-torch's rescaling; one multi-tensor operator for every A
        torch._foreach_mul_([factors[1] for factors in kfacs if len(factors) == 2], 1 / N)
        rows = [
            [None] * len(factors) if r is None else [None, FactorRows.of(r * N**-0.5, factors[1])]
            for factors, r in zip(kfacs, a_rows, strict=True)
        ]
        self._check_finite(kfacs)
        return BlockDiagonalKron(kfacs, rows)

    def _check_finite(self, kfacs: list[list[torch.Tensor]]) -> None:
        """Raise FloatingPointError naming the first parameter with a non-finite factor.

        A NaN or inf entry makes a factor's sum of absolute values non-finite: one
        multi-tensor reduction (``torch._foreach_norm`` with ``ord=1``, one of the operators
        ``torch.optim`` steps with; ``ord=inf`` is ten times slower on the CPU) for every
        factor, read on the host once (one synchronisation per batch on a GPU, not one per
        factor).
        """
        flat = [f for factors in kfacs for f in factors]
        finite_flags = torch.isfinite(torch.stack(torch._foreach_norm(flat, 1)))
        if bool(finite_flags.all()):
            return
        names = [n for n, p in self._model.named_parameters() if p.requires_grad]
        finite = iter(finite_flags.tolist())
        for name, factors in zip(names, kfacs, strict=True):
            if not all([next(finite) for _ in factors]):
                raise FloatingPointError(
                    f"Non-finite Kronecker factor for parameter {name!r}: check that layer's "
                    "weights, the model's outputs and the data."
                )

    @staticmethod
    def _asdl_statistics(module: nn.Module):
        """ASDL's Kronecker factors of ``module`` (``module.fisher``)."""
        stats = getattr(module, "fisher", None)
        if stats is None:
            raise RuntimeError(
                f"ASDL computed no curvature for {type(module).__name__}; is its output "
                "used by the model's forward pass?"
            )
        return stats

    @staticmethod
    def _rule(module: nn.Module):
        """This package's rule for ``module``, or None (ASDL's own ``Linear``/``Conv2d``)."""
        return RULES.get(type(module)) or NORMALIZATION_RULES.get(type(module))

    @classmethod
    def _factored_weight(cls, name: str, module: nn.Module) -> bool:
        """Whether parameter ``name`` of ``module`` is a weight with factors ``[B, A]``."""
        rule = cls._rule(module)
        return name == "weight" and (rule is None or rule.factored_weight(module))

    @classmethod
    def _bias_names(cls, module: nn.Module) -> tuple[str, ...]:
        rule = cls._rule(module)
        if rule is not None:
            return rule.bias_names(module)
        return ("bias",) if getattr(module, "bias", None) is not None else ()

    def kron(
        self, x: torch.Tensor, y: torch.Tensor, N: int, **kwargs: Any
    ) -> tuple[torch.Tensor, BlockDiagonalKron]:
        """KFAC of one batch through ASDL, without its hook deprecation noise.

        ASDL 0.1a4 registers non-full backward hooks, which torch 2.x warns about on every
        forward of a multi-operation module; the hook still receives the output gradient that
        the rules need (tests/curvature/rules/test_rules.py checks the factors). The forward pass
        is recorded without the parameters' edges and stops at the first layer's output, so
        that the backward passes compute only the output gradients, no weight gradient and no
        gradient with respect to the data (``benchmarks/class_backward_passes.py``).

        Args:
            x: Inputs of the batch.
            y: Targets of the batch.
            N: Data set size (``A`` is divided by it).
            **kwargs: ASDL ``FisherConfig`` options (``n_mc_samples``, ``seed``, ...).

        Returns:
            ``(loss, BlockDiagonalKron)``.

        Raises:
            ValueError: If an ``n_mc_samples`` passed here is not a positive integer, or
                above one for the exact GGN.
        """
        # ASDL's backward passes would accumulate into the .grad of lengthscale
        # hyperparameters that require grad (they are not parameters, so it does not zero
        # or restore them): hide them from autograd while fitting.
        hyperparameters = [
            m.lengthscale
            for m in self._model.modules()
            if isinstance(m, AnchorBasis)
            and m.lengthscale_mode is LengthscaleMode.HYPERPARAMETER
            and m.lengthscale.requires_grad
        ]
        for name, module in self._model.named_modules():
            if type(module) in NORMALIZATION_RULES:
                check_normalization(name, module)
        copies = self._class_copies(x)
        with (
            warnings.catch_warnings(),
            _activation_graph_only(self._model),
            kfac_approximation(self._model, self.kfac_approx),
            paired_factored_maps(self._model),
            exact_normalization_blocks(self._model),
        ):
            warnings.filterwarnings(
                "ignore", message="Using a non-full backward hook", category=FutureWarning
            )
            try:
                for omega in hyperparameters:
                    omega.requires_grad_(False)
                loss, kron = self._asdl_kron(x, y, N, copies, **kwargs)
            finally:
                for omega in hyperparameters:
                    omega.requires_grad_(True)
        self._accumulate_projected_factors(N)
        self.examples_seen += len(y)
        return loss, kron

    def _class_copies(self, x) -> int:
        """Copies of the batch for the exact GGN's batched class passes (1: separate passes).

        ``K - 1`` for the exact GGN of a classifier on a tensor batch when
        :attr:`batched_classes` (or, if None, the batch being on a GPU) says so. ``K`` is
        read once from the model's output for one example.
        """
        exact_classifier = (
            self._ggn_type == FISHER_EXACT
            and self.loss_type == LOSS_CROSS_ENTROPY
            and not self.last_layer
            and isinstance(x, torch.Tensor)
        )
        wanted = x.is_cuda if self.batched_classes is None else self.batched_classes
        if not (exact_classifier and wanted):
            return 1
        if self._n_outputs is None:
            self._n_outputs = _output_size(self._model, x)
        return max(self._n_outputs - 1, 1)

    def _asdl_kron(
        self, x, y, N: int, copies: int = 1, **kwargs
    ) -> tuple[torch.Tensor, BlockDiagonalKron]:
        """laplace-torch's ``AsdlGGN.kron``, with the exact cross-entropy GGN in ``K - 1`` passes.

        The fisher maker is :class:`~laplace_equivariance.curvature.cross_entropy.
        ReducedRankCrossEntropyGGN` for the exact GGN of a classifier (its passes batched
        over ``copies`` copies of ``x`` when ``copies > 1``) and ASDL's own otherwise
        (Monte-Carlo Fisher, regression).
        """
        if self.last_layer:
            _, x = self.model.forward_with_features(x)
        kwargs = {"n_mc_samples": self.n_mc_samples} | kwargs
        check_sample_count(kwargs["n_mc_samples"], self.stochastic)
        config = FisherConfig(
            fisher_type=self._ggn_type,
            loss_type=self.loss_type,
            fisher_shapes=[SHAPE_KRON],
            data_size=1,
            **kwargs,
        )
        maker_type = FISHER_MAKERS.get((config.fisher_type, self.loss_type))
        if maker_type is None:
            fisher_maker = get_fisher_maker(self.model, config)
        else:
            fisher_maker = maker_type(self.model, config)
        if copies > 1:
            fisher_maker.replicas = copies
            x = x.repeat(copies, *[1] * (x.dim() - 1))
        fisher_maker.setup_model_call(self._model, x)
        f, _ = fisher_maker.forward_and_backward()
        f = f[: len(f) // copies]
        if self.loss_type == LOSS_CROSS_ENTROPY:
            f, y = f.view(-1, f.size(-1)), y.view(-1)
        loss = self.lossfunc(f.detach(), y)
        kron = self._get_kron_factors(N)
        return self.factor * loss, kron

    def _accumulate_projected_factors(self, N: int) -> None:
        """Add the batch's unprojected statistics to :attr:`projected_factors`.

        ``A`` statistics are divided by ``N`` as laplace-torch divides ``A``.
        """
        for index, (_, name, module) in enumerate(self._parameter_groups()):
            statistic = module.__dict__.pop(UNPROJECTED_ATTR, None) if name == "weight" else None
            if statistic is None:
                continue
            side = RULES[type(module)].projected_side
            statistic = statistic / N if side == 1 else statistic
            if index in self.projected_factors:
                self.projected_factors[index].statistic += statistic
            else:
                self.projected_factors[index] = ProjectedFactor(
                    index, side, module.basis, statistic, module.basis.lengthscale.detach().clone()
                )

    def after_fit(self, la: KronLaplace, previous: tuple[dict, int] | None, n_new: int) -> None:
        """Finish a ``KronLaplace.fit``: sum a sharded fit over the ranks, merge accumulated fits.

        Called by the wrapper of ``KronLaplace.fit``
        (:func:`~laplace_equivariance.curvature.registry.install_fit_hook`).

        Args:
            la: The Laplace approximation just fitted.
            previous: ``(projected_factors, n_data)`` of the earlier fit(s) when this fit was
                accumulated onto them (``override=False``), else None.
            n_new: Examples in this fit's data set.

        Raises:
            ValueError: In a process group of several ranks, if the shards do not cover the
                data set exactly once or the fit accumulates onto an earlier one.
        """
        if distributed.world_size() > 1:
            if previous is not None:
                raise ValueError(
                    "Accumulating fits (override=False) is not supported across ranks: fit "
                    "once over the sharded data."
                )
            device, dtype = device_and_dtype(la)
            distributed.check_shards(self.examples_seen, n_new, device)
            loss = torch.as_tensor(la.loss, device=device, dtype=dtype).clone()
            factors = [f for group in la.H_facs.kfacs for f in group]
            statistics = [record.statistic for record in self.projected_factors.values()]
            distributed.all_reduce_sum([loss, *factors, *statistics])
            # collectives write the factors without bumping their versions: the rows of this
            # rank's examples would pass for those of the sum
            if isinstance(la.H_facs, BlockDiagonalKron):
                la.H_facs = la.H_facs.without_rows()
            la.loss = loss
            la.H = la.H_facs.decompose(damping=la.damping)
        if previous is not None:
            self.merge_projected_factors(*previous, n_new)

    def merge_projected_factors(
        self, previous: dict[int, ProjectedFactor], n_previous: int, n_new: int
    ) -> None:
        """Combine the statistics of an earlier fit with this fit's, as laplace-torch's factors.

        ``KronLaplace.fit(loader, override=False)`` adds a new fit to the old one, weighting
        the ``A`` factors (which carry ``1 / N``) by ``n_previous / (n_previous + n_new)`` and
        ``n_new / (n_previous + n_new)`` and summing the ``B`` factors; the projected
        statistics get the same treatment, so that they equal one fit over both data sets.

        Args:
            previous: :attr:`projected_factors` of the earlier fit(s).
            n_previous: Examples in the earlier fit(s).
            n_new: Examples in this fit.

        Raises:
            ValueError: If the two fits were made at different lengthscales, or a basis is
                in one fit and not the other.
        """
        if previous.keys() != self.projected_factors.keys():
            raise ValueError(
                "The accumulated fits cover different lengthscale hyperparameters: fit once "
                "over all the data (override=True)."
            )
        total = n_previous + n_new
        for index, new in self.projected_factors.items():
            old = previous[index]
            if not torch.equal(old.fitted_lengthscale, new.fitted_lengthscale):
                raise ValueError(
                    "The accumulated fits were made at different lengthscales; their sum is "
                    "no Laplace approximation at either. Refit over all the data at the "
                    "current lengthscales (override=True)."
                )
            if new.side == 1:
                new.statistic = old.statistic * (n_previous / total) + new.statistic * (
                    n_new / total
                )
            else:
                new.statistic = old.statistic + new.statistic

    @classmethod
    def vet_laplace(cls, laplace: object, model: nn.Module, backend_kwargs: dict) -> None:
        """Refuse, before allocation, a full Hessian beyond the memory limit.

        Called by ``Laplace(...)`` (:func:`~laplace_equivariance.curvature.registry.
        install_construction_check`) before laplace-torch allocates the approximation.

        Args:
            laplace: The Laplace object being built.
            model: Its model.
            backend_kwargs: Its ``backend_kwargs`` (``memory_limit``).

        Raises:
            MemoryError: For ``hessian_structure="full"`` with ``P^2`` entries over the limit.
        """
        if not isinstance(laplace, FullLaplace):
            return
        limit = backend_kwargs.get("memory_limit", DEFAULT_MEMORY_LIMIT)
        trainable = [p for p in model.parameters() if p.requires_grad]
        n_params = sum(p.numel() for p in trainable)
        needed = n_params**2 * trainable[0].element_size()
        if needed > limit:
            raise MemoryError(
                f"A full Hessian of {n_params:,} parameters takes {needed / 2**30:,.1f} GiB, "
                f"more than memory_limit={limit:,} bytes: use hessian_structure='kron' (or "
                "'diag'), or raise the limit with backend_kwargs={'memory_limit': ...}."
            )

    def examples_per_chunk(self, x: torch.Tensor, copies: int) -> int:
        """How many examples' ``(K, P)`` Jacobians, ``copies`` times over, fit ``memory_limit``.

        Args:
            x: A batch of inputs (its first example is run once to count the outputs).
            copies: Jacobian-sized tensors alive at once (the predictive's functional
                variance holds a second one).

        Raises:
            MemoryError: If one example's Jacobians exceed ``memory_limit``.
        """
        n_outputs = _output_size(self.model, x)
        example = copies * n_outputs * sum(p.numel() for p in self.params) * x.element_size()
        if example > self.memory_limit:
            raise MemoryError(
                f"The Jacobian of one example takes {example // copies:,} bytes ({copies} "
                f"at once), more than memory_limit={self.memory_limit:,}: use "
                "hessian_structure='kron' for the curvature, or raise the limit with "
                "backend_kwargs={'memory_limit': ...}."
            )
        return self.memory_limit // example

    def predictive_chunk_size(self, x: torch.Tensor) -> int:
        """Examples per call of the GLM predictive.

        Their Jacobians and the functional variance's product with them (two ``(n, K, P)``
        tensors) fit ``memory_limit``.
        """
        return self.examples_per_chunk(x, copies=2)

    def _in_chunks(self, curvature, x, y, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """``curvature(x, y)`` summed over chunks of examples whose Jacobians fit the limit.

        ``curvature`` is laplace-torch's Jacobian-based ``GGNInterface.full`` or ``.diag``:
        its loss is a sum over examples and its Hessian a sum of per-example terms, so the
        chunks add up to the whole batch's.

        Raises:
            MemoryError: If one example's ``(K, P)`` Jacobian exceeds ``memory_limit``.
        """
        if not isinstance(x, torch.Tensor) or self.last_layer:
            return curvature(self, x, y, **kwargs)
        size = self.examples_per_chunk(x, copies=1)
        losses, hessians = zip(
            *(
                curvature(self, x_chunk, y_chunk, **kwargs)
                for x_chunk, y_chunk in zip(x.split(size), y.split(size), strict=True)
            ),
            strict=True,
        )
        return sum(losses[1:], losses[0]), sum(hessians[1:], hessians[0])

    def jacobians(
        self, x: torch.Tensor, enable_backprop: bool = False
    ) -> tuple[list[torch.Tensor | OuterProductJacobian], torch.Tensor]:
        """Per-example Jacobians of the outputs with respect to all trainable parameters.

        laplace-torch's ``CurvatureInterface.jacobians`` differentiates the whole batch's
        ``(N, K)`` outputs at once: ``N K`` vector-Jacobian products, each through all ``N``
        examples, so time and memory grow as ``N^2``. Here ``torch.func.vmap`` of ``jacrev``
        over one example at a time gives the same ``(N, K, P)`` tensor with ``N K`` products
        through one example each. Dict inputs (``dict_key_x``) take laplace-torch's path.

        Args:
            x: Inputs ``(N, ...)``.
            enable_backprop: Keep the graph (to differentiate through the predictive).

        Returns:
            ``(Js, f)``: Jacobians ``(N, K, P)`` (columns in ``model.parameters()`` order, or
            the subnetwork's) and outputs ``(N, K)``.
        """
        if not isinstance(x, torch.Tensor):
            return CurvatureInterface.jacobians(self, x, enable_backprop)
        parts, f = self.parameter_jacobians(x, enable_backprop)
        Js = torch.cat(parts, dim=2)
        if self.subnetwork_indices is not None:
            Js = Js[:, :, self.subnetwork_indices]
        return Js, f

    def parameter_jacobians(
        self, x: torch.Tensor, enable_backprop: bool = False, outer_products: bool = False
    ) -> tuple[list[torch.Tensor | OuterProductJacobian], torch.Tensor]:
        """:meth:`jacobians` split by trainable parameter, before concatenation.

        The GLM predictive takes these (one Kron group per parameter tensor) without ever
        building the ``(N, K, P)`` concatenation
        (:meth:`~laplace_equivariance.curvature.kron.BlockDiagonalKronDecomposed.inv_square_form`).
        With ``outer_products``, the weights of F-FC's maps (``FactoredInputMap``,
        ``FactoredOutputMap``) come as :class:`OuterProductJacobian`: their Jacobian is
        the output gradient with respect to the map's output times the map's input, so only
        those two are computed (the gradient by differentiating a zero added to the map's
        output), not the ``(N, K, C' C XY)`` Jacobian.

        Args:
            x: Inputs ``(N, ...)``.
            enable_backprop: Keep the graph.
            outer_products: Give F-FC maps' weights as outer products.

        Returns:
            ``(Js, f)``: one ``(N, K, numel)`` tensor (or :class:`OuterProductJacobian`) per
            trainable parameter, in ``model.parameters()`` order, and the outputs ``(N, K)``.
        """
        maps = {}
        if outer_products:
            maps = {
                f"{name}.weight": module
                for name, module in self.model.named_modules()
                if type(module) in (FactoredInputMap, FactoredOutputMap)
                and f"{name}.weight" in self.params_dict
            }
        free = {k: v for k, v in self.params_dict.items() if k not in maps}
        held = {k: self.params_dict[k].detach() for k in maps}
        probes = {
            k: torch.zeros(_map_output_shape(m), dtype=x.dtype, device=x.device)
            for k, m in maps.items()
        }
        current: dict[str, Any] = {}

        def add_probe(key: str):
            def hook(_module, inputs, output):
                current["inputs"][key] = inputs[0][0]
                return output + current["probes"][key]

            return hook

        def output(free_params, map_probes, buffers, example):
            current.update(probes=map_probes, inputs={})
            params = {**free_params, **held}
            out = torch.func.functional_call(self.model, (params, buffers), (example[None],))[0]
            return out, (out, current["inputs"])

        handles = [module.register_forward_hook(add_probe(k)) for k, module in maps.items()]
        per_example = torch.func.vmap(
            torch.func.jacrev(output, argnums=(0, 1), has_aux=True), (None, None, None, 0)
        )
        try:
            (jacobians, gradients), (f, inputs) = per_example(free, probes, self.buffers_dict, x)
        except ValueError as error:
            raise _naming_the_batch(error, x) from None
        finally:
            for handle in handles:
                handle.remove()
        Js: list[torch.Tensor | OuterProductJacobian] = []
        for name in self.params_dict:
            if name not in maps:
                Js.append(jacobians[name].flatten(start_dim=2))
            elif type(maps[name]) is FactoredInputMap:  # U: d f / d h (N, K, C', C), V: x
                Js.append(OuterProductJacobian(gradients[name], inputs[name].flatten(2)))
            else:  # U: d f / d y (N, K, C', Q) as (N, K, Q, C'), V: h (N, C', C)
                left = gradients[name].flatten(start_dim=3).transpose(2, 3)
                Js.append(OuterProductJacobian(left, inputs[name]))
        if enable_backprop:
            return Js, f
        detached = [
            OuterProductJacobian(j.left.detach(), j.right.detach())
            if isinstance(j, OuterProductJacobian)
            else j.detach()
            for j in Js
        ]
        return detached, f.detach()

    full = functools.partialmethod(_in_chunks, GGNInterface.full)
    """The exact GGN ``(loss, H)``, ``H`` of shape ``(P, P)``, from bounded Jacobian chunks."""
    diag = functools.partialmethod(_in_chunks, GGNInterface.diag)
    """The exact GGN's diagonal ``(loss, h)``, ``h`` of shape ``(P,)``, the same way."""
