"""Polyphase subsampling that keeps strict translation (and rotation) equivariance.

Paper App. F.2, after Chaman and Dokmanic (2021): a feature map is split into its four
stride-2 polyphase components and, **for each example separately**, the component with the
largest l2-norm is kept. A circular shift of the input permutes (and shifts) the components,
so the kept component shifts with it: the subsampling is equivariant up to a shift on the
coarse grid, and a network that ends on a 1x1 map is exactly invariant.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PolyphaseSubsample2d"]


class PolyphaseSubsample2d(nn.Module):
    """Adaptive polyphase subsampling by a factor of two (APS, paper App. F.2).

    For an input ``x`` of shape ``(N, *C, H, W)`` with even ``H`` and ``W`` the four components
    ``x[..., i::2, j::2]`` for ``(i, j)`` in ``{0, 1}^2`` are compared by their l2-norm over all
    non-batch dimensions, and each example keeps its own largest component. Ties go to the
    first component in the order (0, 0), (0, 1), (1, 0), (1, 1).

    Shapes:
        - Input: ``(N, *C, H, W)``, any number of channel dimensions ``*C`` (e.g. ``(C,)`` or
          ``(C, 4)`` for p4 feature maps), ``H`` and ``W`` even.
        - Output: ``(N, *C, H // 2, W // 2)``.

    The module has no parameters. The output of one example never depends on the other
    examples in the batch.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Keep, per example, the polyphase component of largest norm.

        Args:
            x: Feature maps of shape ``(N, *C, H, W)`` with even ``H`` and ``W``.

        Returns:
            The selected components, shape ``(N, *C, H // 2, W // 2)``.

        Raises:
            ValueError: If ``x`` has fewer than three dimensions or an odd spatial size.
        """
        if x.dim() < 3 or x.shape[-1] % 2 or x.shape[-2] % 2:
            raise ValueError(
                "PolyphaseSubsample2d expects input of shape (N, *C, H, W) with even H and W, "
                f"got {tuple(x.shape)}."
            )
        return self.take(x, self.choose(x))

    @staticmethod
    def choose(x: torch.Tensor) -> torch.Tensor:
        """Each example's polyphase component of largest norm, ``2 i + j``, shape ``(N,)``.

        Args:
            x: Feature maps of shape ``(N, *C, H, W)`` with even ``H`` and ``W``.
        """
        n, h, w = x.shape[0], x.shape[-2], x.shape[-1]
        phases = x.reshape(n, -1, h // 2, 2, w // 2, 2)
        with torch.no_grad():  # the choice is not differentiable: record no graph for it
            norms = phases.square().sum(dim=(1, 2, 4)).flatten(start_dim=1)  # (N, 4), 2i + j
        return norms.argmax(dim=1)

    @staticmethod
    def take(x: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
        """Component ``choice[n]`` of example ``n``: ``x[n, ..., i::2, j::2]``, ``2 i + j``.

        Also the subsampling of one summand of a sum whose components were chosen by
        :meth:`choose` on the sum (the selection is linear once chosen).

        Args:
            x: Feature maps of shape ``(N, *C, H, W)`` with even ``H`` and ``W``.
            choice: Component per example, shape ``(N,)``, values in ``0..3``.

        Returns:
            Shape ``(N, *C, H // 2, W // 2)``.
        """
        n, h, w = x.shape[0], x.shape[-2], x.shape[-1]
        # x[n, ..., 2a + i, 2b + j] -> phases[n, c, a, i, b, j], a view of x; indexing the
        # view itself, not a permuted copy, keeps the backward pass one scatter into the
        # input's own layout
        phases = x.reshape(n, -1, h // 2, 2, w // 2, 2)
        kept = phases[torch.arange(n, device=x.device), :, :, choice // 2, :, choice % 2]
        return kept.reshape(*x.shape[:-2], h // 2, w // 2)
