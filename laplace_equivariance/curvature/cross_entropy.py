r"""The exact GGN of the softmax cross-entropy with ``K - 1`` backward passes instead of ``K``.

The GGN needs a factorisation :math:`\Lambda = L L^\top` of the Hessian of the negative
log-likelihood with respect to the logits, one backward pass per column of ``L``
(docs/curvature.md). For ``K`` classes with probabilities ``p``,

.. math::
    \Lambda = \mathrm{diag}(p) - p p^\top
            = D^{1/2} (I - s s^\top) D^{1/2}, \qquad s = \sqrt{p},\ D = \mathrm{diag}(p),

has rank ``K - 1`` (:math:`\Lambda \mathbf 1 = 0`). ASDL's exact fisher maker uses the ``K``
columns :math:`\sqrt{p_k}\,(p - e_k)`; this module uses ``K - 1``. Since :math:`\|s\| = 1`,
:math:`I - s s^\top` projects onto the complement of ``s``, which a Householder reflection
:math:`H = I - 2 w w^\top / w^\top w` with :math:`w = s + e_K` maps onto the first ``K - 1``
coordinates (:math:`H s = -e_K`, :math:`H = H^\top = H^{-1}`). So

.. math::
    I - s s^\top = H (I - e_K e_K^\top) H = H_{:, :K-1} H_{:, :K-1}^\top, \qquad
    L = D^{1/2} H_{:, :K-1}.

The reflection is stable for every ``p`` (:math:`w^\top w = 2 + 2 s_K \ge 2`), including
probabilities that underflow to zero. With ``K`` classes the exact fit runs ``K - 1`` backward
passes instead of ``K``.
"""

from __future__ import annotations

import torch
from asdl.fisher import FisherExactCrossEntropy
from torch.nn import functional as F

from laplace_equivariance.curvature.kron_fisher import KronFisherMaker

__all__ = ["ReducedRankCrossEntropyGGN", "softmax_hessian_factor"]


def softmax_hessian_factor(probs: torch.Tensor) -> torch.Tensor:
    r"""``L`` with :math:`L L^\top = \mathrm{diag}(p) - p p^\top`, ``K - 1`` columns per example.

    Args:
        probs: Class probabilities of shape ``(N, K)``, ``K >= 2``, rows summing to one.

    Returns:
        ``L`` of shape ``(N, K, K - 1)``.

    Raises:
        ValueError: If ``probs`` is not ``(N, K)`` with ``K >= 2``.
    """
    if probs.dim() != 2 or probs.shape[1] < 2:
        raise ValueError(
            f"softmax_hessian_factor expects probabilities of shape (N, K) with K >= 2, got "
            f"{tuple(probs.shape)}."
        )
    k = probs.shape[1]
    s = probs.sqrt()
    w = s.clone()
    w[:, -1] += 1
    scale = 2 / (w * w).sum(dim=1)
    eye = torch.eye(k, k - 1, dtype=probs.dtype, device=probs.device)
    reflection = eye - scale[:, None, None] * w[:, :, None] * w[:, None, : k - 1]
    return s[:, :, None] * reflection


class ReducedRankCrossEntropyGGN(KronFisherMaker, FisherExactCrossEntropy):
    r"""ASDL's exact fisher maker for the cross-entropy, with ``K - 1`` backward passes.

    Pass ``j`` back-propagates :math:`\sum_n f_n^\top L_{n, :, j}` from the logits ``f``
    (:func:`softmax_hessian_factor`), so that the factors ASDL accumulates equal those of
    its ``K`` passes. With one class the Hessian is zero and ASDL's own loop runs. The passes
    are driven by :class:`~laplace_equivariance.curvature.kron_fisher.KronFisherMaker`
    (Kronecker factors only).

    With :attr:`replicas` ``= K - 1`` the model was called on ``K - 1`` copies of the batch
    (copy ``j`` the examples ``j N .. (j + 1) N - 1``) and one backward pass carries column
    ``j`` of ``L`` through copy ``j``: every module's output gradient then holds the ``K - 1``
    passes' gradients as rows, and the factors, sums of outer products over rows, are the
    same. One pass of ``K - 1`` times the examples launches the kernels of one pass, where
    the ``K - 1`` passes launch ``K - 1`` times as many: on a GPU, where these networks' passes
    are bound by launches, not arithmetic, that is most of the exact fit's time.
    """

    def _fisher_loop(self, closure) -> None:
        logits = self._logits.view(-1, self._logits.size(-1))
        n_classes = logits.shape[1]
        if n_classes < 2:
            super()._fisher_loop(closure)
            return
        if self.replicas not in (1, n_classes - 1):
            raise ValueError(
                f"The batch was copied {self.replicas} times for {n_classes} classes; the "
                f"batched exact GGN needs {n_classes - 1} copies (one per column of L)."
            )
        n_examples = len(logits) // self.replicas
        with torch.no_grad():
            factor = softmax_hessian_factor(F.softmax(logits[:n_examples], dim=-1))
        if self.replicas > 1:
            columns = factor.permute(2, 0, 1).reshape(-1, n_classes)  # copy j: column j
            closure(lambda: (logits * columns).sum())
            return
        for j in range(n_classes - 1):
            closure(lambda j=j: (logits * factor[:, :, j]).sum(), retain_graph=j < n_classes - 2)
