r"""Per-example Jacobians and the dense curvature built from them, within a memory limit.

The GLM predictive needs the Jacobians ``J`` of the outputs with respect to the parameters,
``(N, K, P)``; laplace-torch's ``hessian_structure="full"`` and ``"diag"`` build the exact GGN
:math:`\sum_n J_n^\top \Lambda_n J_n` from them. :class:`ChunkedJacobians` gives
:class:`~laplace_equivariance.curvature.backend.EquivariantKFAC` these with ``torch.func``
(one example at a time: ``N K`` vector-Jacobian products through one example each, instead of
through the whole batch), F-FC's map weights optionally as outer products
(:class:`~laplace_equivariance.curvature.outer_product.OuterProductJacobian`), and the dense
curvature on chunks of examples whose Jacobians fit ``memory_limit``.
"""

from __future__ import annotations

import functools
from collections.abc import MutableMapping
from typing import Any, TypeGuard, cast

import torch
from laplace.baselaplace import FullLaplace
from laplace.curvature.curvature import CurvatureInterface, GGNInterface
from torch import nn

from laplace_equivariance.curvature.batches import first_example
from laplace_equivariance.curvature.outer_product import OuterProductJacobian
from laplace_equivariance.layers import FactoredInputMap, FactoredOutputMap

__all__ = ["DEFAULT_MEMORY_LIMIT", "ChunkedJacobians", "naming_the_batch", "output_size"]

DEFAULT_MEMORY_LIMIT = 2**31
"""Bytes that :class:`EquivariantKFAC` lets a dense curvature object take (2 GiB): the
Jacobians of one chunk of examples for ``"diag"`` and ``"full"``, and the ``P x P`` Hessian
of ``"full"``. Set per approximation with ``backend_kwargs={"memory_limit": bytes}``."""


def _is_plain_map(module: nn.Module) -> TypeGuard[FactoredInputMap | FactoredOutputMap]:
    """Whether ``module`` is an F-FC map of exactly these classes (not a subclass's)."""
    return type(module) in (FactoredInputMap, FactoredOutputMap)


def _map_output_shape(module: FactoredInputMap | FactoredOutputMap) -> tuple[int, ...]:
    """One example's output shape of an F-FC map: ``(C', C)`` or ``(C', X', Y')``."""
    if isinstance(module, FactoredInputMap):
        return (module.out_channels, module.in_channels)
    return (module.out_channels, *module.out_size)


def naming_the_batch(error: ValueError, x: torch.Tensor) -> ValueError:
    """``error`` of a layer's shape check on one example, naming the caller's whole batch.

    The output size and the per-example Jacobians run the model on one example, a batch
    ``(1, *x.shape[1:])``: the check's message would name that shape, not the batch given.
    """
    one = str((1, *x.shape[1:]))
    return ValueError(str(error).replace(f"got {one}", f"got {tuple(x.shape)}"))


def output_size(model: nn.Module, x: torch.Tensor | MutableMapping) -> int:
    """The model's number of outputs, from its first example (without gradients).

    ``x`` is a tensor batch or a dict-like one (laplace-torch's ``dict_key_x`` inputs).

    Raises:
        ValueError: A layer's shape check, naming the whole batch's shape.
    """
    try:
        with torch.no_grad():
            return model(first_example(x)).shape[-1]
    except ValueError as error:
        if not isinstance(x, torch.Tensor):
            raise
        raise naming_the_batch(error, x) from None


class ChunkedJacobians:
    """Jacobians and the Jacobian-based exact GGN for a laplace-torch curvature backend.

    A mixin before ``laplace.curvature.CurvatureInterface`` in the bases: it uses the
    backend's ``model``, ``params``, ``params_dict``, ``buffers_dict``,
    ``subnetwork_indices``, ``last_layer`` and ``memory_limit`` (bytes).
    """

    # set by the CurvatureInterface and the backend this mixin is a base of
    model: nn.Module
    params: list[nn.Parameter]
    params_dict: dict[str, nn.Parameter]
    buffers_dict: dict[str, torch.Tensor]
    subnetwork_indices: torch.LongTensor | None
    last_layer: bool
    memory_limit: int

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
        n_outputs = output_size(self.model, x)
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
        self, x: torch.Tensor | MutableMapping[str, Any], enable_backprop: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-example Jacobians of the outputs with respect to all trainable parameters.

        laplace-torch's ``CurvatureInterface.jacobians`` differentiates the whole batch's
        ``(N, K)`` outputs at once: ``N K`` vector-Jacobian products, each through all ``N``
        examples, so time and memory grow as ``N^2``. Here ``torch.func.vmap`` of ``jacrev``
        over one example at a time gives the same ``(N, K, P)`` tensor with ``N K`` products
        through one example each. Dict inputs (``dict_key_x``) take laplace-torch's path.

        Args:
            x: Inputs ``(N, ...)``, or a dict-like batch.
            enable_backprop: Keep the graph (to differentiate through the predictive).

        Returns:
            ``(Js, f)``: Jacobians ``(N, K, P)`` (columns in ``model.parameters()`` order, or
            the subnetwork's) and outputs ``(N, K)``.
        """
        if not isinstance(x, torch.Tensor):
            # a mixin: self is always also the CurvatureInterface it precedes in the bases
            return CurvatureInterface.jacobians(cast(CurvatureInterface, self), x, enable_backprop)
        parts, f = self.parameter_jacobians(x, enable_backprop)
        # all dense: outer products only when asked for
        Js = torch.cat([p if isinstance(p, torch.Tensor) else p.dense() for p in parts], dim=2)
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
        maps: dict[str, FactoredInputMap | FactoredOutputMap] = {}
        if outer_products:
            maps = {
                f"{name}.weight": module
                for name, module in self.model.named_modules()
                if _is_plain_map(module) and f"{name}.weight" in self.params_dict
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
            raise naming_the_batch(error, x) from None
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
