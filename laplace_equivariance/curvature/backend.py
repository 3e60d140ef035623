"""EquivariantKFAC: a laplace-torch curvature backend for the relaxed-equivariance layers."""

from __future__ import annotations

import functools
import warnings
from collections.abc import MutableMapping
from typing import Any

import torch
from asdl.fisher import FisherConfig
from asdl.grad_maker import LOSS_CROSS_ENTROPY, LOSS_MSE
from asdl.matrices import FISHER_EXACT, FISHER_MC, SHAPE_KRON
from laplace.curvature import AsdlGGN
from laplace.utils import FeatureExtractor
from laplace.utils.matrix import Kron
from torch import nn

from laplace_equivariance.curvature.activation_graph import activation_graph_only
from laplace_equivariance.curvature.batches import is_mapping, moved, on_gpu, repeated
from laplace_equivariance.curvature.cross_entropy import ReducedRankCrossEntropyGGN
from laplace_equivariance.curvature.factor_rows import FactorRows, is_pending
from laplace_equivariance.curvature.fit_merging import FitMerging
from laplace_equivariance.curvature.fit_passes import (
    GPU_PASS_ROWS,
    ConcatenatedBatches,
    batches_per_pass,
    check_fit_batch_size,
)
from laplace_equivariance.curvature.jacobians import (
    DEFAULT_MEMORY_LIMIT,
    ChunkedJacobians,
    output_size,
)
from laplace_equivariance.curvature.kron import BlockDiagonalKron, zero_factor
from laplace_equivariance.curvature.kron_fisher import ExactGaussianGGN
from laplace_equivariance.curvature.monte_carlo import (
    MonteCarloCrossEntropyFisher,
    MonteCarloGaussianFisher,
    check_sample_count,
)
from laplace_equivariance.curvature.projection import ProjectedFactor, anchor_basis
from laplace_equivariance.curvature.registry import (
    exact_normalization_blocks,
    install_construction_check,
    install_fit_hook,
    install_kron_initialiser,
    install_predictive_chunking,
    install_state_dict_hooks,
    own_convolution_rules,
    register_with_asdl,
)
from laplace_equivariance.curvature.rules import (
    A_ROWS_ATTR,
    EXTRA_BLOCKS_ATTR,
    RULES,
    UNPROJECTED_ATTR,
    kfac_approximation,
    paired_factored_maps,
)
from laplace_equivariance.curvature.rules.normalization import (
    NORMALIZATION_RULES,
    check_normalization,
)
from laplace_equivariance.curvature.support import (
    check_kfac_approx,
    check_supported,
)
from laplace_equivariance.layers import (
    AnchorBasis,
    LengthscaleMode,
    RelaxedLayer,
)

__all__ = ["EquivariantKFAC"]

# At import, before any Laplace object exists: KronLaplace allocates its factors in __init__.
register_with_asdl()
install_kron_initialiser()
install_fit_hook()
install_state_dict_hooks()
install_predictive_chunking()
install_construction_check()


FISHER_MAKERS = {
    (FISHER_EXACT, LOSS_CROSS_ENTROPY): ReducedRankCrossEntropyGGN,
    (FISHER_MC, LOSS_CROSS_ENTROPY): MonteCarloCrossEntropyFisher,
    (FISHER_MC, LOSS_MSE): MonteCarloGaussianFisher,
    (FISHER_EXACT, LOSS_MSE): ExactGaussianGGN,
}
"""This package's fisher maker per (ASDL fisher type, loss type): the GGN's two, exact and
Monte Carlo, for laplace-torch's two likelihoods."""


class EquivariantKFAC(ChunkedJacobians, FitMerging, AsdlGGN):
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
    ASDL's own rules for ``nn.Linear`` and zero-padded ``nn.Conv2d`` (this package's
    :class:`~laplace_equivariance.curvature.rules.stock_conv.Conv2dRule` for grouped, dilated
    or otherwise padded ones, and for every ``nn.Conv2d`` in KFAC-reduce). There is one Kron block
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
    :func:`laplace_equivariance.curvature.lengthscales.log_marginal_likelihood`.

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
        fit_batch_size: Examples per curvature pass of ``Laplace.fit``: consecutive batches
            of the loader are concatenated up to this many (whole batches; the factors are
            the same, :mod:`~laplace_equivariance.curvature.fit_passes`). None (default):
            the loader's batches on the CPU; on a GPU as many as keep examples times the
            batched class copies at most
            :data:`~laplace_equivariance.curvature.fit_passes.GPU_PASS_ROWS` (4,096).
        host_eigenvalues: Eigenvalues of a fit's factors that lie on an accelerator are
            computed on the host's threads, copied there and back in one copy each
            (:func:`~laplace_equivariance.curvature.eigen.symmetric_eigvalsh_all`), instead of
            by the accelerator's batched eigensolver, whose many small Jacobi kernels and
            synchronisations were most of an F-FC+CONV fit's fixed cost on a GPU. Applies to
            models with block-diagonal factors (F-FC, S-FC); a model whose factors are all
            dense is decomposed by laplace-torch's own ``Kron.decompose``. No effect on the CPU.

    Attributes:
        examples_seen: Examples of the current fit so far (this rank's shard in a process
            group).
        projected_factors: Parameter group -> its factor projected on a basis whose
            lengthscale is a hyperparameter, with the statistic summed over the batches
            since the last :meth:`init_kron`.

    Raises:
        UnsupportedModuleError: If a module with trainable parameters has no KFAC rule
            (an unknown custom layer, a BatchNorm without running statistics; BatchNorm,
            GroupNorm and LayerNorm get exact blocks,
            :mod:`laplace_equivariance.curvature.rules.normalization`).
        ValueError: If ``n_mc_samples`` is not a positive integer, or above one without
            ``stochastic=True``, ``memory_limit`` is not positive, ``kfac_approx`` is
            unknown, or ``fit_batch_size`` is neither None nor a positive integer.
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
        fit_batch_size: int | None = None,
        host_eigenvalues: bool = True,
    ) -> None:
        check_sample_count(n_mc_samples, stochastic)
        check_fit_batch_size(fit_batch_size)
        if memory_limit <= 0:
            raise ValueError(
                f"memory_limit must be a positive number of bytes, got {memory_limit}."
            )
        check_kfac_approx(model, kfac_approx)
        self.n_mc_samples = n_mc_samples
        self.memory_limit = memory_limit
        self.kfac_approx = kfac_approx
        self.batched_classes = batched_classes
        self.fit_batch_size = fit_batch_size
        self.host_eigenvalues = host_eigenvalues
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
        check_supported(self._model)
        self.projected_factors: dict[int, ProjectedFactor] = {}
        self.examples_seen = 0

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
        ``log_marginal_likelihood`` of an unfitted approximation). The factors are stride-0
        views of one 0-dim zero (:func:`~laplace_equivariance.curvature.kron.zero_factor`):
        no memory and one fill (on a GPU one kernel) for all of them, where dense zeros cost
        a write of every factor (for Table 1's F-FC+CONV 96 MB, twice per fit:
        ``KronLaplace.__init__`` and ``fit`` both initialise). The first batch's
        :class:`BlockDiagonalKron` added to it (``BlockDiagonalKron.__radd__``, which Python
        prefers for a subclass) is the sum itself, its tensors taken over rather than copied.

        Also empties :attr:`projected_factors`: ``KronLaplace.fit`` calls it before its batches.

        Args:
            device: Device of the factors.
            dtype: Their dtype.

        Returns:
            A ``Kron`` of zeros, one group per trainable parameter.
        """
        self.projected_factors = {}
        self.examples_seen = 0
        zeros = functools.partial(zero_factor, zero=torch.zeros((), device=device, dtype=dtype))
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
        # laplace-torch 0.3 annotates Kron's kfacs as list[tuple[Tensor] | Tensor]; it takes
        # (and its init_from_model builds) a list of one or two factors per group
        return Kron(kfacs)  # type: ignore[arg-type]

    def _collected_kron_factors(self) -> BlockDiagonalKron:
        r"""Collect ASDL's factors and the rules' extra blocks, in parameter order, ``A / N``.

        ``A`` factors come divided by the data set size ``N`` (as laplace-torch's
        ``_rescale_kron_factors`` divides them) from the fisher maker's covariance scale
        (:attr:`~laplace_equivariance.curvature.kron_fisher.KronFisherMaker.a_scale`), the
        rows that rules leave for block-diagonal ``A`` factors
        (:data:`~laplace_equivariance.curvature.rules.A_ROWS_ATTR`) by :math:`\sqrt N`.
        """
        kfacs: list[list[torch.Tensor]] = []
        a_rows: list[torch.Tensor | None] = []
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
        rows: list[list[FactorRows | None]] = [
            [None] * len(factors) if r is None else [None, FactorRows.of(r, factors[1])]
            for factors, r in zip(kfacs, a_rows, strict=True)
        ]
        self._check_finite(kfacs, rows)
        return BlockDiagonalKron(kfacs, rows, self.host_eigenvalues)

    def _check_finite(
        self, kfacs: list[list[torch.Tensor]], rows: list[list[FactorRows | None]]
    ) -> None:
        r"""Raise FloatingPointError naming the first parameter with a non-finite factor.

        Every factor is positive semi-definite (a sum of outer products: KFAC's ``A`` and
        ``B``, the Monte-Carlo Fisher's, the exact blocks ``J^T H J`` of normalisation layers),
        so its diagonal alone decides: :math:`|F_{ij}| \le \sqrt{F_{ii} F_{jj}}` (Cauchy-Schwarz)
        bounds every entry by the diagonal, and a NaN or inf in a statistic that enters
        :math:`F_{ij}` enters :math:`F_{ii}` or :math:`F_{jj}` as its square. So the check reads
        the diagonals (of every block of a block-diagonal factor; a 1-D factor is its own): one
        multi-tensor reduction (``torch._foreach_norm`` with ``ord=1``, a sum of absolute
        values that is non-finite if any entry is) read on the host once (one synchronisation
        per batch on a GPU, not one per factor), without reading the whole of F-FC's
        ``1024 x 1024`` blocks every batch. A pending factor's diagonal comes from its rows.
        """
        flat = [
            (r.diagonal(f) if is_pending(f) and r is not None else f.diagonal(dim1=-2, dim2=-1))
            if f.ndim > 1
            else f
            for fs, rs in zip(kfacs, rows, strict=True)
            for f, r in zip(fs, rs, strict=True)
        ]
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
        self,
        x: torch.Tensor | MutableMapping[str, Any],
        y: torch.Tensor,
        N: int,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, BlockDiagonalKron]:
        """KFAC of one batch through ASDL, without its hook deprecation noise.

        ASDL 0.1a4 registers non-full backward hooks, which torch 2.x warns about on every
        forward of a multi-operation module; the hook still receives the output gradient that
        the rules need (tests/curvature/rules/test_rules.py checks the factors). The forward pass
        is recorded without the parameters' edges and stops at the first layer's output, so
        that the backward passes compute only the output gradients, no weight gradient and no
        gradient with respect to the data (``benchmarks/class_backward_passes.py``).

        Args:
            x: Inputs of the batch (a tensor, or a dict-like batch).
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
            activation_graph_only(self._model),
            kfac_approximation(self._model, self.kfac_approx),
            own_convolution_rules(self._model),
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
        self._accumulate_projected_factors()
        self.examples_seen += len(y)
        return loss, kron

    def fit_loader(self, loader: Any, device: torch.device) -> Any:
        """The loader ``Laplace.fit`` takes its curvature passes over.

        ``loader`` itself, or its batches concatenated :func:`batches_per_pass` at a time
        (:attr:`fit_batch_size`; None: on a GPU up to :data:`GPU_PASS_ROWS` rows, examples
        times the exact GGN's batched class copies). The choice reads the loader's
        ``batch_size`` and one example of its data set (collated by the loader's own
        ``collate_fn``), never iterates the loader (a shuffled loader would draw from the
        global random generator). Loaders without a ``batch_size`` (a batch sampler) are left
        as they are. Dict-like batches are concatenated value by value
        (:func:`~laplace_equivariance.curvature.batches.concatenated`).

        Args:
            loader: The loader given to ``fit``.
            device: The device the model's parameters are on.
        """
        if self.fit_batch_size is None and device.type != "cuda":
            return loader
        batch_size = getattr(loader, "batch_size", None)
        if not batch_size:
            return loader
        pass_examples = self.fit_batch_size
        if pass_examples is None:
            example = loader.collate_fn([loader.dataset[0]])
            x = example if is_mapping(example) else example[0]
            pass_examples = GPU_PASS_ROWS // self._class_copies(moved(x, device))
        k = batches_per_pass(batch_size, pass_examples)
        return loader if k == 1 else ConcatenatedBatches(loader, k)

    def _class_copies(self, x) -> int:
        """Copies of the batch for the exact GGN's batched class passes (1: separate passes).

        ``K - 1`` for the exact GGN of a classifier when :attr:`batched_classes` (or, if None,
        the batch being on a GPU) says so; a dict-like batch is copied value by value
        (:func:`~laplace_equivariance.curvature.batches.repeated`). ``K`` is read once from
        the model's output for one example.
        """
        exact_classifier = (
            self._ggn_type == FISHER_EXACT
            and self.loss_type == LOSS_CROSS_ENTROPY
            and not self.last_layer
        )
        wanted = on_gpu(x) if self.batched_classes is None else self.batched_classes
        if not (exact_classifier and wanted):
            return 1
        if self._n_outputs is None:
            self._n_outputs = output_size(self._model, x)
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
            if not isinstance(self.model, FeatureExtractor):
                raise TypeError(
                    "A last-layer fit needs laplace-torch's FeatureExtractor as the backend's "
                    f"model, got {type(self.model).__name__}."
                )
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
        fisher_maker = FISHER_MAKERS[config.fisher_type, self.loss_type](self.model, config)
        fisher_maker.a_scale = 1 / N
        if copies > 1:
            fisher_maker.replicas = copies
            x = repeated(x, copies)
        fisher_maker.setup_model_call(self._model, x)
        f, _ = fisher_maker.forward_and_backward()
        f = f[: len(f) // copies]
        if self.loss_type == LOSS_CROSS_ENTROPY:
            f, y = f.view(-1, f.size(-1)), y.view(-1)
        loss = self.lossfunc(f.detach(), y)
        kron = self._collected_kron_factors()
        return self.factor * loss, kron

    def _accumulate_projected_factors(self) -> None:
        """Add the batch's unprojected statistics to :attr:`projected_factors`.

        ``A`` statistics come divided by ``N`` as ``A`` itself (the fisher maker's
        :attr:`~laplace_equivariance.curvature.kron_fisher.KronFisherMaker.a_scale`).
        """
        for index, (_, name, module) in enumerate(self._parameter_groups()):
            statistic = module.__dict__.pop(UNPROJECTED_ATTR, None) if name == "weight" else None
            if statistic is None:
                continue
            side = RULES[type(module)].projected_side
            if side is None:
                raise RuntimeError(
                    f"{type(module).__name__} left a statistic to project, but its rule projects "
                    "no factor."
                )
            if index in self.projected_factors:
                self.projected_factors[index].statistic += statistic
            else:
                basis = anchor_basis(module)
                self.projected_factors[index] = ProjectedFactor(
                    index, side, basis, statistic, basis.lengthscale.detach().clone()
                )
