"""After a ``KronLaplace.fit``: the ranks' shards summed, and accumulated fits merged.

laplace-torch's ``KronLaplace.fit(loader, override=False)`` adds a fit to the previous one;
under ``torchrun`` each rank fits its shard of the data. :class:`FitMerging` finishes both
cases for :class:`~laplace_equivariance.curvature.backend.EquivariantKFAC`, including the
statistics of factors projected on a basis whose lengthscale is a hyperparameter
(:mod:`laplace_equivariance.curvature.projection`), which laplace-torch does not know of.
"""

from __future__ import annotations

import torch
from laplace.baselaplace import KronLaplace

from laplace_equivariance import distributed
from laplace_equivariance.curvature.fitted import fitted_factors, kron_factors
from laplace_equivariance.curvature.kron import BlockDiagonalKron
from laplace_equivariance.curvature.projection import ProjectedFactor
from laplace_equivariance.curvature.registry import device_and_dtype

__all__ = ["FitMerging"]


class FitMerging:
    """``after_fit`` for a backend with ``projected_factors`` and ``examples_seen``.

    A mixin before laplace-torch's curvature interface in the bases;
    :func:`~laplace_equivariance.curvature.registry.install_fit_hook` calls ``after_fit``.
    """

    # set by the backend this mixin is a base of
    projected_factors: dict[int, ProjectedFactor]
    examples_seen: int

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
            fitted = fitted_factors(la)
            factors = [f for group in kron_factors(fitted) for f in group]
            statistics = [record.statistic for record in self.projected_factors.values()]
            distributed.all_reduce_sum([loss, *factors, *statistics])
            # collectives write the factors without bumping their versions: the rows of this
            # rank's examples would pass for those of the sum
            if isinstance(fitted, BlockDiagonalKron):
                fitted = la.H_facs = fitted.without_rows()
            la.loss = loss
            la.H = fitted.decompose(damping=la.damping)
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
