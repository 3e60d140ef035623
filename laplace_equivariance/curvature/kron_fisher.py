"""ASDL's fisher-maker driver, reduced to what Kronecker factors need.

ASDL's :meth:`asdl.fisher.FisherMaker.forward_and_backward` serves every curvature shape
(full, layer-wise, Kronecker, diagonal), inverses and Fisher-vector products. Around each
backward pass its closure also switches every parameter's ``requires_grad`` off and back on,
clears per-example gradients and builds the full covariance from them. For the Kronecker
shape there are no per-example gradients, so that last step only looks them up module by
module, and for each module that has no ASDL operation (containers, activations, pooling)
the lookup raises and catches a ``KeyError`` whose message formats the module's repr (so does
the extraction of the results after the passes). On the F-FC+CONV network this bookkeeping
took about 5% of an exact-GGN fit (nine passes per batch); :class:`KronFisherMaker` runs the
same passes without it.
"""

from __future__ import annotations

import torch
from asdl.core import no_centered_cov
from asdl.fisher import FisherExactMSE, FisherMaker
from asdl.matrices import SHAPE_KRON
from asdl.utils import skip_param_grad

__all__ = ["ExactGaussianGGN", "KronFisherMaker"]


class KronFisherMaker(FisherMaker):
    """A :class:`asdl.fisher.FisherMaker` whose forward and backward passes fill ``kron`` only.

    Mix it in before one of ASDL's makers, which supplies ``_fisher_loop`` (the backward
    passes). The result, ``module.fisher.kron`` for every supported module, is what ASDL's
    own driver computes with ``fisher_shapes=[SHAPE_KRON]`` and its default arguments (fresh
    factors, no loss gradient, no inverse, no Fisher-vector product).
    """

    replicas: int = 1
    """Copies of the batch that the model call holds (a maker whose backward passes run on
    all copies at once sets it). Statistics of the forward pass (``A``, its rows, a projected
    ``A``'s statistic) are taken with the covariance scale divided by it, so that each example
    counts once; those of the backward pass (``B``, the extra blocks) sum over the copies, as
    over separate backward passes."""

    a_scale: float = 1.0
    """A further factor of the forward pass's statistics (``A``, its rows, a projected
    ``A``'s statistic). :class:`~laplace_equivariance.EquivariantKFAC` sets ``1 / N``:
    laplace-torch's division of ``A`` by the data set size, taken by the covariance scale
    that ASDL applies anyway instead of by one more pass over every ``A`` after the batch."""

    def forward_and_backward(self) -> tuple[torch.Tensor, None]:
        """One forward pass with the ``A`` statistics, then the maker's backward passes.

        Returns:
            ``(model output, None)``, as ASDL's driver without the loss.

        Raises:
            ValueError: If the config asks for a shape other than ``SHAPE_KRON`` alone.
        """
        config = self.config
        shapes = config.fisher_shapes
        shapes = [shapes] if isinstance(shapes, str) else list(shapes)
        if shapes != [SHAPE_KRON]:
            raise ValueError(
                f"{type(self).__name__} computes Kronecker factors only; got fisher_shapes="
                f"{config.fisher_shapes!r}. Use ASDL's get_fisher_maker for other shapes."
            )
        self.zero_fisher()
        if config.seed is not None:
            torch.random.manual_seed(config.seed)
        with no_centered_cov(self.model, [SHAPE_KRON], ignore_modules=config.ignore_modules) as cxt:
            cxt.set_cov_scale(config.scale / config.data_size / self.replicas * self.a_scale)
            self.call_model()
            cxt.set_cov_scale(config.scale / config.data_size)

            def closure(nll_expr, retain_graph: bool = False) -> None:
                nll_expr().backward(retain_graph=retain_graph)

            with skip_param_grad(self.model):  # no weight gradient accumulates in .grad
                self._fisher_loop(closure)
            for module in self.model.modules():
                # only modules with an operation: a lookup on any other raises in ASDL
                if cxt.is_operation_registered(module):
                    fisher = cxt.cov_symmatrix(module, pop=True)
                    if fisher is not None:
                        setattr(module, config.fisher_attr, fisher)
        return self._model_output, None


class ExactGaussianGGN(KronFisherMaker, FisherExactMSE):
    """ASDL's exact GGN of ``0.5 * MSE`` (one backward pass per output), Kronecker factors only.

    Its passes are ASDL's; :class:`KronFisherMaker` drives them, so that every maker of
    :class:`~laplace_equivariance.EquivariantKFAC` takes :attr:`KronFisherMaker.a_scale`.
    """
