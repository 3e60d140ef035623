import inspect
import re
import warnings

import pytest
import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch.utils.data import DataLoader, TensorDataset

from laplace_equivariance import EquivariantKFAC, NotLearningWarning, models
from laplace_equivariance.layers import FactoredLinear2d
from laplace_equivariance.marglik import checkpoint as marglik_checkpoint
from laplace_equivariance.marglik import trainer as marglik_trainer
from laplace_equivariance.marglik.training import (
    CheckpointError,
    marglik_step_epochs,
    marglik_training,
    paper_schedule,
)
from tests.host_reads import host_reads

K = 3

# most runs here train on random labels (setup), at chance by design: their NotLearningWarning
# says nothing; the tests of the warning set their own filters
pytestmark = pytest.mark.filterwarnings(
    "ignore::laplace_equivariance.marglik.chance.NotLearningWarning"
)


def setup(seed=0, name="f-fc+conv", **build):
    torch.manual_seed(seed)
    model = models.build(name, (1, 32, 32), K, alpha=1, **build)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(24, 1, 32, 32, generator=g)
    y = torch.randint(0, K, (24,), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    return model, loader


SCHEDULE = dict(
    n_epochs=4, n_epochs_burnin=1, marglik_frequency=1, n_hypersteps=2, progress_bar=False
)


class _Stop(Exception):
    """Raised by a callback to interrupt a run after an epoch (its checkpoint written)."""


def _stop_after(last_epoch):
    """A ``marglik_training`` callback that stops the run after epoch ``last_epoch``."""

    def callback(epoch, info):
        if epoch == last_epoch:
            raise _Stop

    return callback


def test_learns_one_precision_per_layer_and_path():
    model, loader = setup()
    seen = []
    la, trained, margliks, losses = marglik_training(
        model,
        loader,
        prior_structure="path",
        callback=lambda e, info: seen.append((e, info)),
        **SCHEDULE,
    )
    assert len(losses) == 4 and len(margliks) == 4 * 2
    assert margliks[-1] < margliks[0]
    assert [e for e, _ in seen] == [1, 2, 3, 4]
    precisions = seen[-1][1]["prior_precision"]
    assert list(precisions)[:2] == ["layer1.fc", "layer1.conv"] and len(precisions) == 8 * 2 + 4
    assert any(abs(v - 1.0) > 1e-3 for v in precisions.values())
    assert la.prior_precision.shape == (len(list(trained.parameters())),)


HYPER = {"sparse_options": {"lengthscale_mode": "hyperparameter"}}


@pytest.mark.parametrize(
    "name, build", [("f-fc+conv", {}), ("s-conv", HYPER)], ids=["f-fc+conv", "hyper-omega"]
)
def test_resumed_run_ends_bit_identical(tmp_path, name, build):
    """With lengthscale hyperparameters, omega and its Adam state come from the checkpoint."""
    model, loader = setup(name=name, **build)
    _, straight, straight_margliks, straight_losses = marglik_training(model, loader, **SCHEDULE)
    if build:  # omega moved, so an equal end state needs omega from the checkpoint
        assert straight.layer1.conv.basis.lengthscale.item() != 1.0

    model, loader = setup(name=name, **build)
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(2), **SCHEDULE)
    # the checkpoint of epoch 2 was written before the callback stopped the run; resume from
    # a differently initialised model to show that everything comes from the checkpoint
    model, loader = setup(seed=123, name=name, **build)
    _, resumed, margliks, losses = marglik_training(
        model, loader, checkpoint=checkpoint, **SCHEDULE
    )
    assert margliks == straight_margliks and losses == straight_losses
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


SPACED = dict(
    n_epochs=7, n_epochs_burnin=4, marglik_frequency=2, n_hypersteps=1, checkpoint_every=3
)
"""Fits after epochs 4 and 6; a checkpoint due after epochs 3, 4 (a fit), 6 and 7 (the last)."""


def _written_epochs(monkeypatch) -> list[int]:
    """The epochs of the checkpoints written from now on (the file writes counted)."""
    written = []
    original = marglik_checkpoint.save_atomically

    def counting(state, path):
        written.append(state["state"]["epoch"])
        original(state, path)

    monkeypatch.setattr(marglik_checkpoint, "save_atomically", counting)
    return written


def test_checkpoint_every_writes_every_kth_epoch_each_fit_and_the_last(tmp_path, monkeypatch):
    written = _written_epochs(monkeypatch)
    model, loader = setup()
    marglik_training(model, loader, checkpoint=tmp_path / "run.pt", **SPACED)
    assert written == [3, 4, 6, 7]
    written.clear()
    model, loader = setup()
    marglik_training(
        model, loader, checkpoint=tmp_path / "every.pt", **SPACED | {"checkpoint_every": 1}
    )
    assert written == [1, 2, 3, 4, 5, 6, 7]


def test_a_run_resumed_from_a_spaced_checkpoint_repeats_the_epochs_since_and_ends_identical(
    tmp_path, monkeypatch
):
    model, loader = setup()
    unspaced = SPACED | {"checkpoint_every": 1}  # no file to space: the same run
    _, straight, straight_margliks, straight_losses = marglik_training(model, loader, **unspaced)
    written = _written_epochs(monkeypatch)
    model, loader = setup()
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(5), **SPACED)
    assert written == [3, 4]  # epoch 5 ran but is not in the file
    model, loader = setup(seed=123)
    _, resumed, margliks, losses = marglik_training(model, loader, checkpoint=checkpoint, **SPACED)
    assert written == [3, 4, 6, 7]
    assert margliks == straight_margliks and losses == straight_losses
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_non_finite_loss_names_the_epoch_the_spaced_checkpoint_holds(tmp_path):
    model, loader = setup()

    def poison_after_epoch_five(epoch, info):
        if epoch == 5:
            with torch.no_grad():
                model.layer1.fc.input_map.weight.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match="epoch 6; the checkpoint .* holds epoch 4"):
        marglik_training(
            model,
            loader,
            checkpoint=tmp_path / "run.pt",
            callback=poison_after_epoch_five,
            **SPACED,
        )


def test_checkpoint_every_without_a_checkpoint_file_is_refused_not_ignored():
    model, loader = setup()
    with pytest.raises(ValueError, match="no checkpoint is given: pass checkpoint=PATH"):
        marglik_training(model, loader, checkpoint_every=3, **SCHEDULE)


@pytest.mark.parametrize("every", [0, -2, 2.5, True, "3"])
def test_checkpoint_every_not_a_positive_whole_number_is_refused_before_training(every):
    model, loader = setup()
    with pytest.raises(ValueError, match="checkpoint_every must be a whole number of epochs"):
        marglik_training(model, loader, checkpoint_every=every, **SCHEDULE)


def spoil_after_epoch_three(model: torch.nn.Module, epoch: int) -> None:
    """Triple every weight after epoch 3: epoch 4's marginal likelihood is far worse, so the
    best epoch (3) is not the last one (otherwise both modes return the same model)."""
    if epoch == 3:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(3)


@pytest.mark.parametrize("restore_best", [True, False], ids=["best-marglik", "last-epoch"])
def test_returns_the_model_of_the_best_or_the_last_epoch(restore_best):
    model, loader = setup()
    states, best = {}, []

    def keep(epoch, info):
        states[epoch] = {k: v.clone() for k, v in model.state_dict().items()}
        best.append(info["best_epoch"])
        spoil_after_epoch_three(model, epoch)

    _, trained, margliks, _ = marglik_training(
        model, loader, callback=keep, restore_best=restore_best, **SCHEDULE
    )
    # every epoch ends with two hyperparameter steps; an epoch is judged by its last
    last_steps = margliks[1::2]
    assert 1 + last_steps.index(min(last_steps)) == 3
    assert best == ([1, 2, 3, 3] if restore_best else [None] * 4)
    expected = states[best[-1] if restore_best else 4]
    for name, value in trained.state_dict().items():
        assert torch.equal(value, expected[name]), name


def test_resuming_with_restore_best_off_keeps_the_last_epoch(tmp_path):
    """The checkpoint of a run that tracked its best epoch does not override the setting."""
    checkpoint = tmp_path / "run.pt"

    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(2), **SCHEDULE)
    assert torch.load(checkpoint, weights_only=False)["state"]["best"] is not None
    last, best = {}, []

    def keep(epoch, info):
        last.update({k: v.clone() for k, v in model.state_dict().items()})
        best.append(info["best_epoch"])
        spoil_after_epoch_three(model, epoch)  # the tracked best (epoch 2 or 3) is not last

    model, loader = setup()
    _, trained, _, _ = marglik_training(
        model, loader, checkpoint=checkpoint, callback=keep, restore_best=False, **SCHEDULE
    )
    assert best == [None, None]
    for name, value in trained.state_dict().items():
        assert torch.equal(value, last[name]), name


def test_wall_time_of_the_epochs_accumulates_across_a_resume(tmp_path):
    checkpoint = tmp_path / "run.pt"
    before, after = [], []

    def record_and_stop_after_two(epoch, info):
        before.append(info["seconds"])
        _stop_after(2)(epoch, info)

    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(
            model, loader, checkpoint=checkpoint, callback=record_and_stop_after_two, **SCHEDULE
        )
    model, loader = setup()
    marglik_training(
        model,
        loader,
        checkpoint=checkpoint,
        callback=lambda e, i: after.append(i["seconds"]),
        **SCHEDULE,
    )
    assert 0 < before[0] < before[1] < after[0] < after[1]
    assert torch.load(checkpoint, weights_only=False)["state"]["seconds"] == after[-1]


def test_a_checkpoint_of_another_model_raises_saying_what_to_do(tmp_path):
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"n_epochs": 1})
    saved = torch.load(checkpoint, weights_only=False)
    # the layout of an older version: CONV's weight inside a conv2d child
    saved["model"] = {
        k.replace("conv.weight", "conv.conv2d.weight"): v for k, v in saved["model"].items()
    }
    torch.save(saved, checkpoint)
    with pytest.raises(ValueError, match="does not fit this run.*Delete it"):
        marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE)


def test_a_checkpoint_without_wall_time_resumes_with_a_warning(tmp_path):
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"n_epochs": 2})
    saved = torch.load(checkpoint, weights_only=False)
    del saved["state"]["seconds"]  # as an older version wrote it
    torch.save(saved, checkpoint)
    with pytest.warns(UserWarning, match="no record of its epochs' wall time"):
        marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE)


def test_non_finite_loss_names_the_epoch_and_keeps_the_last_good_checkpoint(tmp_path):
    model, loader = setup()
    checkpoint = tmp_path / "run.pt"

    def poison(epoch, info):
        if epoch == 2:
            with torch.no_grad():
                model.layer1.fc.input_map.weight.fill_(float("nan"))

    with pytest.raises(FloatingPointError, match="epoch 3"):
        marglik_training(model, loader, checkpoint=checkpoint, callback=poison, **SCHEDULE)
    saved = torch.load(checkpoint, weights_only=False)
    assert saved["state"]["epoch"] == 2
    assert torch.isfinite(saved["model"]["layer1.fc.input_map.weight"]).all()


class NanGradient(torch.autograd.Function):
    """Zero in the forward pass, NaN gradient in the backward pass."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.new_zeros(())

    @staticmethod
    def backward(ctx, grad):
        return torch.full(ctx.shape, float("nan"), dtype=grad.dtype)


@pytest.mark.parametrize(
    "poisoned, message",
    [
        ("prior", "log prior precision of 'layer1.conv.weight'"),
        ("omega", "lengthscale of 'layer1.conv"),
    ],
)
def test_non_finite_hyperparameter_gradient_names_it_and_keeps_the_last_good_checkpoint(
    tmp_path, monkeypatch, poisoned, message
):
    model, loader = setup(name="s-conv", **HYPER)
    original = marglik_trainer.log_marginal_likelihood

    def poison_in_epoch_2(la, loader, prior_precision, derivative):
        marglik = original(la, loader, prior_precision, derivative)
        if len(stepped) < 2 * SCHEDULE["n_hypersteps"]:
            stepped.append(True)
            return marglik
        target = prior_precision if poisoned == "prior" else model.layer1.conv.basis.lengthscale
        return marglik + NanGradient.apply(target)

    stepped = []
    monkeypatch.setattr(marglik_trainer, "log_marginal_likelihood", poison_in_epoch_2)
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(FloatingPointError, match=f"Epoch 3, hyperparameter step 1.*{message}"):
        marglik_training(
            model, loader, checkpoint=checkpoint, lengthscale_derivative="partial", **SCHEDULE
        )
    saved = torch.load(checkpoint, weights_only=False)
    assert saved["state"]["epoch"] == 2
    assert torch.isfinite(saved["log_prior_prec"]).all()


def test_a_marglik_subset_estimates_the_whole_training_set():
    """A marginal-likelihood loader over ``n`` of ``N`` examples is scaled by ``N / n``: on a
    training set that is the subset twice over, the returned approximation (fitted on the
    subset) equals one fitted on the whole training set at laplace-torch's temperature 1."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), K, alpha=1).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 1, 32, 32, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (8,), generator=g)
    twice = TensorDataset(torch.cat([x, x]), torch.cat([y, y]))
    subset = DataLoader(TensorDataset(x, y), batch_size=8)
    la, trained, _, _ = marglik_training(
        model, DataLoader(twice, batch_size=8, shuffle=True), marglik_loader=subset, **SCHEDULE
    )
    assert la.temperature == 0.5
    whole = Laplace(
        trained,
        "classification",
        subset_of_weights="all",
        hessian_structure="kron",
        backend=EquivariantKFAC,
        prior_precision=la.prior_precision,
    )
    whole.fit(DataLoader(twice, batch_size=8))
    torch.testing.assert_close(
        la.log_marginal_likelihood(), whole.log_marginal_likelihood(), rtol=1e-10, atol=0
    )


def test_monte_carlo_samples_reach_the_backend():
    model, loader = setup()
    la, _, margliks, _ = marglik_training(
        model, loader, stochastic=True, n_mc_samples=3, **SCHEDULE
    )
    assert la.backend.stochastic and la.backend.n_mc_samples == 3
    assert margliks[-1] < margliks[0]


def test_kfac_reduce_reaches_the_backend_and_needs_it():
    model, loader = setup(name="conv")
    la, _, _, _ = marglik_training(model, loader, kfac_approx="reduce", **SCHEDULE)
    assert la.backend.kfac_approx == "reduce"
    with pytest.raises(ValueError, match="option of EquivariantKFAC"):
        marglik_training(model, loader, kfac_approx="reduce", backend=AsdlGGN, **SCHEDULE)
    with pytest.raises(ValueError, match="kfac_approx must be one of"):
        marglik_training(model, loader, kfac_approx="reduced", **SCHEDULE)


def test_backend_kwargs_reach_every_fit_and_leave_the_result_unchanged():
    """Passes of 16 examples instead of the loader's 8, eigenvalues on the device: the fits
    and so the training are the same up to float rounding."""
    results = []
    for backend_kwargs in (None, {"fit_batch_size": 16, "host_eigenvalues": False}):
        model, loader = setup()
        results.append(marglik_training(model, loader, backend_kwargs=backend_kwargs, **SCHEDULE))
    (la, _, margliks, losses), (tuned, _, tuned_margliks, tuned_losses) = results
    assert tuned.backend.fit_batch_size == 16 and tuned.backend.host_eigenvalues is False
    assert la.backend.fit_batch_size is None and la.backend.host_eigenvalues is True
    torch.testing.assert_close(tuned_margliks, margliks, rtol=1e-4, atol=0)
    torch.testing.assert_close(tuned_losses, losses, rtol=1e-4, atol=0)


def test_compiled_map_steps_train_as_eager_ones():
    """A counting ``torch.compile`` backend: the steps' forward passes are compiled graphs
    (compiled once, the Laplace fits eager), and training is the eager run's."""
    graphs = []

    def counting(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    results = []
    for compile_kwargs in (None, {"backend": counting}):
        model, loader = setup()
        results.append(marglik_training(model, loader, compile_kwargs=compile_kwargs, **SCHEDULE))
    (_, _, margliks, losses), (la, trained, compiled_margliks, compiled_losses) = results
    assert len(graphs) == 1
    assert not isinstance(trained, torch._dynamo.eval_frame.OptimizedModule)
    torch.testing.assert_close(compiled_losses, losses, rtol=1e-5, atol=0)
    torch.testing.assert_close(compiled_margliks, margliks, rtol=1e-5, atol=0)


@pytest.mark.parametrize("backend", [EquivariantKFAC, AsdlGGN])
def test_backend_kwargs_the_backend_does_not_take_are_refused_before_training(backend):
    model, loader = setup()
    epochs = []
    with pytest.raises(ValueError, match=r"sets \['fit_batchsize'\], which .* does not take"):
        marglik_training(
            model,
            loader,
            backend=backend,
            backend_kwargs={"fit_batchsize": 16},
            callback=lambda epoch, _: epochs.append(epoch),
            **SCHEDULE,
        )
    assert epochs == []


@pytest.mark.parametrize("own", ["stochastic", "n_mc_samples", "kfac_approx"])
def test_backend_kwargs_may_not_set_marglik_trainings_own_options(own):
    model, loader = setup()
    with pytest.raises(ValueError, match=f"backend_kwargs sets \\['{own}'\\]"):
        marglik_training(model, loader, backend_kwargs={own: 1}, **SCHEDULE)


def test_the_backend_options_a_refusal_lists_are_exactly_the_accepted_ones():
    """The list named stochastic, n_mc_samples and kfac_approx, which are then refused."""
    model, loader = setup()
    with pytest.raises(ValueError, match="its options: ") as refused:
        marglik_training(model, loader, backend_kwargs={"fit_batchsize": 16}, **SCHEDULE)
    listed = re.search(r"its options: \[(.*)\]", str(refused.value)).group(1)
    listed = [name.strip(" '") for name in listed.split(",")]
    defaults = inspect.signature(EquivariantKFAC).parameters
    assert set(listed) < set(defaults) and "stochastic" not in listed
    no_fit = dict(SCHEDULE, n_epochs=1, n_epochs_burnin=2, final_laplace=False)
    for name in listed:  # each is taken: one MAP epoch, no refusal
        kwargs = {name: defaults[name].default}
        marglik_training(model, loader, backend_kwargs=kwargs, **no_fit)
    for name in set(defaults) - {"model", "likelihood", *listed}:  # each is refused
        with pytest.raises(ValueError, match=f"backend_kwargs sets \\['{name}'\\]"):
            marglik_training(model, loader, backend_kwargs={name: None}, **no_fit)


def test_a_last_layer_backend_option_is_refused_saying_what_to_do():
    """It ended in an AttributeError ('RelaxedNet' object has no attribute 'last_layer')."""
    model, loader = setup()
    with pytest.raises(ValueError, match="fits all of them.*subset_of_weights='last_layer'"):
        marglik_training(model, loader, backend_kwargs={"last_layer": True}, **SCHEDULE)


@pytest.mark.parametrize(
    "options, named",
    [
        ({"prior_prec_init": 0.0}, "prior_prec_init"),
        ({"prior_prec_init": -1.0}, "prior_prec_init"),
        ({"prior_prec_init": float("inf")}, "prior_prec_init"),
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
    ],
)
def test_a_prior_precision_or_temperature_not_above_zero_is_named(options, named):
    """They failed with "math domain error" (the log of the initial precision)."""
    model, loader = setup()
    with pytest.raises(ValueError, match=f"^{named} must be a finite number above 0"):
        marglik_training(model, loader, **options, **SCHEDULE)


def test_a_diagonal_prior_with_the_kronecker_hessian_is_refused_before_training():
    """It failed in laplace-torch at the first fit, after the burn-in's epochs."""
    model, loader = setup()
    epochs = []
    with pytest.raises(ValueError, match="prior_structure='diag'.*hessian_structure='kron'"):
        marglik_training(
            model,
            loader,
            prior_structure="diag",
            callback=lambda epoch, _: epochs.append(epoch),
            **dict(SCHEDULE, n_epochs_burnin=2),
        )
    assert epochs == []


@pytest.mark.parametrize(
    "options",
    [{"n_mc_samples": 2}, {"stochastic": True, "n_mc_samples": 2, "backend": AsdlGGN}],
    ids=["exact-ggn", "stock-backend"],
)
def test_monte_carlo_samples_need_the_stochastic_equivariant_backend(options):
    model, loader = setup()
    with pytest.raises(ValueError, match="stochastic=True and backend=EquivariantKFAC"):
        marglik_training(model, loader, **options, **SCHEDULE)


def test_monte_carlo_sample_count_is_checked_before_training():
    """Not only at the first Laplace fit, after the burn-in epochs (here two)."""
    model, loader = setup()
    epochs = []
    with pytest.raises(ValueError, match="positive integer"):
        marglik_training(
            model,
            loader,
            stochastic=True,
            n_mc_samples=0,
            callback=lambda epoch, _: epochs.append(epoch),
            **dict(SCHEDULE, n_epochs_burnin=3),
        )
    assert epochs == []


@pytest.mark.parametrize("derivative", ["total", "partial"])
def test_lengthscale_hyperparameters_are_learned(derivative):
    model, loader = setup(name="s-fc+s-conv", **HYPER)
    seen = []
    schedule = dict(SCHEDULE, n_epochs=1, lengthscale_derivative=derivative)
    la, trained, margliks, _ = marglik_training(
        model, loader, callback=lambda e, info: seen.append(info), **schedule
    )
    lengthscales = seen[-1]["lengthscale"]
    # eight layers, each with an S-FC (input and output map) and an S-CONV basis
    assert len(lengthscales) == 24 and "layer1.conv.basis" in lengthscales
    # on layer 8's 1x1 output grid phi = 1 for every omega: no gradient, no change
    assert lengthscales.pop("layer8.fc.output_map.basis") == 1.0
    assert all(abs(omega - 1.0) > 1e-3 for omega in lengthscales.values())
    assert margliks[-1] < margliks[0]  # the steps (on omega too) raise the marginal likelihood
    assert trained.layer1.conv.basis.lengthscale.item() != 1.0
    assert not trained.layer1.conv.basis.lengthscale.requires_grad  # tracked in steps only
    assert la.backend.projected_factors  # the final Laplace keeps the statistics


def test_lengthscale_hyperparameters_need_the_kron_structure_and_a_known_derivative():
    model, loader = setup(name="s-conv", **HYPER)
    with pytest.raises(ValueError, match="hessian_structure='kron'"):
        marglik_training(model, loader, hessian_structure="diag", **SCHEDULE)
    with pytest.raises(ValueError, match="exact GGN"):
        marglik_training(model, loader, stochastic=True, **SCHEDULE)
    with pytest.raises(ValueError, match="lengthscale_derivative must be one of"):
        marglik_training(model, loader, lengthscale_derivative="exact", **SCHEDULE)
    # the Monte-Carlo Fisher goes with the partial derivative
    marglik_training(model, loader, stochastic=True, lengthscale_derivative="partial", **SCHEDULE)


def test_paper_schedule_anneals_the_learning_rate_to_zero_over_the_run():
    """App. F.6: Adam at 0.01, cosine to 0 over every batch of the run; lr_hyp 0.1, 10 burn-in
    epochs, a fit every 5 epochs with 20 steps on it (the reference configuration)."""
    schedule = paper_schedule(n_epochs=4, steps_per_epoch=3, marglik=False)
    assert paper_schedule(n_epochs=10, steps_per_epoch=3)["n_epochs_burnin"] == 10
    assert (
        schedule["lr_hyp"],
        schedule["n_epochs_burnin"],
        schedule["marglik_frequency"],
        schedule["n_hypersteps"],
    ) == (0.1, 5, 5, 20)  # MAP: burn-in past the last epoch
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = schedule["optimizer_cls"]([weight], **schedule["optimizer_kwargs"])
    scheduler = schedule["scheduler_cls"](optimizer, **schedule["scheduler_kwargs"])
    rates = []
    for _ in range(4 * 3):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == 0.01 and rates[6] == pytest.approx(0.005)
    assert paper_schedule(40, 3, lr_min=1e-6)["scheduler_kwargs"]["eta_min"] == 1e-6
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-15)


def test_paper_schedule_takes_the_reference_codes_sgd_on_request():
    schedule = paper_schedule(n_epochs=40, steps_per_epoch=3, optimizer="sgd")
    assert schedule["optimizer_cls"] is torch.optim.SGD
    assert schedule["optimizer_kwargs"] == {"lr": 0.01, "momentum": 0.9}
    assert paper_schedule(40, 3)["optimizer_cls"] is torch.optim.Adam
    with pytest.raises(ValueError, match="optimizer must be one of"):
        paper_schedule(40, 3, optimizer="rmsprop")


@pytest.mark.parametrize("lr_min", [-1.0, 0.1, float("nan")])
def test_paper_schedule_refuses_an_end_below_zero_or_above_the_learning_rate(lr_min):
    """lr_min=-1 annealed into negative learning rates: accuracy 0, NLL 1.3e7, no error."""
    with pytest.raises(ValueError, match=r"lr_min must be at least 0 and at most lr \(0.01\)"):
        paper_schedule(n_epochs=20, steps_per_epoch=3, lr=0.01, lr_min=lr_min)
    paper_schedule(n_epochs=20, steps_per_epoch=3, lr=0.01, lr_min=0.01)  # constant: taken


def test_paper_schedule_refuses_a_run_too_short_to_learn():
    """The first marginal-likelihood step comes at epoch 10: 9 epochs would learn nothing."""
    with pytest.raises(ValueError, match="no marginal-likelihood step.*marglik=False"):
        paper_schedule(n_epochs=9, steps_per_epoch=3)
    assert paper_schedule(9, 3, n_epochs_burnin=5)["n_epochs_burnin"] == 5


@pytest.mark.parametrize(
    "n_epochs, burnin, frequency, expected",
    [(12, 10, 5, [10]), (9, 10, 5, []), (14, 11, 5, []), (3, 0, 1, [1, 2, 3]), (6, 2, 3, [3, 6])],
)
def test_marglik_step_epochs_follow_laplace_torchs_rule(n_epochs, burnin, frequency, expected):
    assert marglik_step_epochs(n_epochs, burnin, frequency) == expected


def test_a_learning_run_without_any_marginal_likelihood_step_warns():
    model, loader = setup()
    with pytest.warns(UserWarning, match="nothing is learned"):
        _, _, margliks, _ = marglik_training(
            model, loader, n_epochs=3, n_epochs_burnin=2, marglik_frequency=5
        )
    assert margliks == []


def _separable(n=64, seed=0):
    """Two classes of ``n / 2`` examples each, told apart by the sign of the first input: a
    linear model learns them."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, 4, generator=g)
    x[:, 0] = x[:, 0].abs() * (2 * y - 1)
    return DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)


@pytest.mark.parametrize("lr, warns", [(1e-9, True), (1e-1, False)], ids=["still", "learns"])
def test_a_learning_run_at_chance_where_its_burn_in_ends_warns_once(lr, warns):
    """A stock model at lr 1e-9 stays as drawn: at most the chance bound of 64 examples
    (68.8 % on two balanced classes) in epoch 3, the burn-in's end; at lr 0.1 it is far above."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    schedule = dict(n_epochs=4, n_epochs_burnin=3, marglik_frequency=1, n_hypersteps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        marglik_training(model, _separable(), optimizer_kwargs={"lr": lr}, **schedule)
    told = [str(w.message) for w in caught if issubclass(w.category, NotLearningWarning)]
    assert len(told) == int(warns)
    if warns:
        assert " in epoch 3 " in told[0] and "chance up to 68.8 %" in told[0]


def test_a_run_without_burn_in_is_checked_in_the_epoch_of_its_first_fit():
    """laplace-torch's defaults (no burn-in) with fits every second epoch: a network is not
    told it learned nothing after one epoch, before any fit is due, but where the first fit is
    (the README's first snippet warned after one epoch)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    schedule = dict(n_epochs=4, marglik_frequency=2, n_hypersteps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        marglik_training(model, _separable(), optimizer_kwargs={"lr": 1e-9}, **schedule)
    told = [str(w.message) for w in caught if issubclass(w.category, NotLearningWarning)]
    assert len(told) == 1 and " in epoch 2 " in told[0]


def test_a_map_run_is_not_checked_against_chance():
    """Without a fit there is no burn-in to end: marglik_training says nothing (train checks
    its MAP runs itself)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotLearningWarning)
        marglik_training(
            torch.nn.Linear(4, 2),
            _separable(),
            optimizer_kwargs={"lr": 1e-9},
            n_epochs=2,
            n_epochs_burnin=3,
        )


def test_an_empty_loader_is_named():
    model, _ = setup()
    empty = DataLoader(TensorDataset(torch.zeros(0, 1, 32, 32), torch.zeros(0).long()))
    with pytest.raises(ValueError, match="train_loader is empty"):
        marglik_training(model, empty, n_epochs=1)


def test_a_corrupt_checkpoint_is_named_with_how_to_start_afresh(tmp_path):
    model, loader = setup()
    for content in (b"", b"not a checkpoint", b"PK\x03\x04truncated"):
        path = tmp_path / "checkpoint.pt"
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match=f"{path}.*Delete it to start afresh"):
            marglik_training(model, loader, n_epochs=1, checkpoint=path)
    torch.save({"something": 1}, path)
    with pytest.raises(CheckpointError, match="not a marglik_training checkpoint"):
        marglik_training(model, loader, n_epochs=1, checkpoint=path)


def test_paper_schedule_runs_through_marglik_training():
    model, loader = setup()
    schedule = paper_schedule(
        n_epochs=2, steps_per_epoch=len(loader), n_epochs_burnin=1, marglik_frequency=1
    )
    _, _, margliks, losses = marglik_training(model, loader, prior_structure="path", **schedule)
    assert len(losses) == 2 and len(margliks) == 2 * 20


# the callback's sigma_noise is read from the learned (differentiable) noise without its graph
@pytest.mark.filterwarnings("error:Converting a tensor with requires_grad")
def test_regression_on_a_relaxed_model_learns_the_observation_noise():
    """Targets with noise of standard deviation 0.1: sigma moves from 1 to near it (0.11)."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 2, alpha=1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 1, 32, 32, generator=g)
    y = x.mean(dim=(1, 2, 3)).unsqueeze(-1).repeat(1, 2) + 0.1 * torch.randn(32, 2, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    seen = []
    la, _, margliks, _ = marglik_training(
        model,
        loader,
        likelihood="regression",
        prior_structure="path",
        optimizer_kwargs={"lr": 1e-2},
        n_epochs=30,
        n_epochs_burnin=5,
        marglik_frequency=5,
        callback=lambda epoch, info: seen.append(info["sigma_noise"]),
        restore_best=False,
    )
    assert la.likelihood == "regression" and la.sigma_noise.item() == seen[-1]
    assert seen[0] == 1.0 and 0.05 < seen[-1] < 0.2
    assert margliks[-1] < margliks[0]


@pytest.mark.parametrize("learns", [False, True], ids=["map", "marglik"])
def test_two_runs_with_one_seed_on_one_machine_agree_exactly(learns):
    """What repeats: the same seed, machine and thread count give the same run, bit for bit
    (other machines round differently, README)."""
    schedule = dict(SCHEDULE, n_epochs=2, n_epochs_burnin=1 if learns else 3)
    runs = []
    for _ in range(2):
        model, loader = setup(seed=0)
        la, trained, margliks, losses = marglik_training(model, loader, **schedule)
        weights = [p.detach().clone() for p in trained.parameters()]
        runs.append((margliks, losses, weights, la.prior_precision.clone()))
    (margliks, losses, weights, precision), again = runs
    assert bool(margliks) == learns
    assert margliks == again[0] and losses == again[1]
    assert all(torch.equal(a, b) for a, b in zip(weights, again[2], strict=True))
    assert torch.equal(precision, again[3])


@pytest.mark.parametrize("learns, label", [(False, "MAP training"), (True, "marglik training")])
def test_progress_bar_names_what_runs(capsys, learns, label):
    model, loader = setup()
    burnin = 1 if learns else 3
    marglik_training(
        model, loader, n_epochs=2, n_epochs_burnin=burnin, progress_bar=True, final_laplace=False
    )
    assert label in capsys.readouterr().err


def test_progress_bar_shows_the_last_fits_marglik_between_fits(monkeypatch, capsys):
    """Issue 70: between fits the bar showed marglik=-; it shows the last fit's value, and no
    marglik before the first fit."""
    import tqdm

    shown = []
    set_postfix = tqdm.tqdm.set_postfix

    def recording(bar, *args, **kwargs):
        shown.append(kwargs.get("marglik"))
        return set_postfix(bar, *args, **kwargs)

    monkeypatch.setattr(tqdm.tqdm, "set_postfix", recording)
    torch.manual_seed(0)
    schedule = SCHEDULE | {"marglik_frequency": 2, "progress_bar": True}  # fits in epochs 2, 4
    _, _, margliks, _ = marglik_training(
        torch.nn.Linear(4, 2), _separable(), final_laplace=False, **schedule
    )
    first, second = (f"{m:.1f}" for m in margliks[1::2])  # each fit's last of its 2 steps
    assert shown == [None, first, first, second]
    assert "marglik=-" not in capsys.readouterr().err


def test_a_checkpoint_from_another_world_size_resumes_with_a_warning(tmp_path):
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"n_epochs": 2})
    saved = torch.load(checkpoint, weights_only=False)
    assert saved["world_size"] == 1
    saved["world_size"] = 2  # as two ranks under torchrun write it
    torch.save(saved, checkpoint)
    with pytest.warns(UserWarning, match="written by 2 process"):
        _, _, _, losses = marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE)
    assert len(losses) == SCHEDULE["n_epochs"]


@pytest.mark.parametrize(
    "options", [{"backend": AsdlGGN}, {"hessian_structure": "diag"}], ids=["asdl-ggn", "diag"]
)
def test_a_process_group_refuses_fits_that_are_not_summed_over_the_ranks(monkeypatch, options):
    """Ranks would learn different hyperparameters: refused before training, saying what to use."""
    model, loader = setup()
    monkeypatch.setattr(marglik_trainer.distributed, "world_size", lambda: 2)
    with pytest.raises(ValueError, match="In a process group .* backend=EquivariantKFAC"):
        marglik_training(model, loader, **(SCHEDULE | options))


def _factored_model_and_data(pair_scale: float | None):
    """F-FC+CONV on 32 random images; with ``pair_scale``, every F-FC channel pair's factors
    rescaled at random within a factor ``pair_scale`` (the same function)."""
    torch.manual_seed(0)
    model = models.build("f-fc+conv", (1, 32, 32), 3, alpha=1).double()
    if pair_scale is not None:
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, FactoredLinear2d):
                    s = pair_scale ** (2 * torch.rand_like(module.output_map.weight[0]) - 1)
                    module.output_map.weight.mul_(s)
                    module.input_map.weight.div_(s[..., None])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 1, 32, 32, dtype=torch.float64, generator=g)
    y = torch.randint(0, 3, (32,), generator=g)
    return model, DataLoader(TensorDataset(x, y), batch_size=16)


@pytest.mark.parametrize("balance", [False, True], ids=["unbalanced", "balanced"])
def test_balanced_factors_make_the_marglik_blind_to_how_a_product_is_split(balance):
    """Two F-FC+CONV networks computing the same function, one with its factor pairs split
    differently: with balance_factors the first marginal likelihood (taken before any weight
    moves: lr 0) is the same for both; without, the split changes it by far more."""
    margliks = []
    for pair_scale in (None, 20.0):
        model, loader = _factored_model_and_data(pair_scale)
        x = loader.dataset.tensors[0]
        before = model(x).detach()
        _, model, values, _ = marglik_training(
            model,
            loader,
            n_epochs=1,
            n_hypersteps=1,
            optimizer_kwargs={"lr": 0.0},
            balance_factors=balance,
        )
        torch.testing.assert_close(model(x), before, rtol=1e-9, atol=1e-9)
        margliks.append(values[0])
    if balance:
        assert margliks[1] == pytest.approx(margliks[0], rel=1e-9)
    else:
        assert abs(margliks[1] - margliks[0]) > 0.1 * abs(margliks[0])


def _held_run(n_epochs, **options):
    """A silenced F-FC+CONV network trained with its FC-type paths held; first fit at epoch 2."""
    model, loader = setup()
    model.start_equivariant_()
    held = model.non_equivariant_parameters()
    start = [p.detach().clone() for p in held]
    seen = []
    marglik_training(
        model,
        loader,
        n_epochs=n_epochs,
        n_epochs_burnin=2,
        marglik_frequency=1,
        n_hypersteps=2,
        held_until_fit=held,
        callback=lambda e, info: seen.append(info["prior_precision"]),
        **options,
    )
    moved = [not torch.equal(p, p0) for p, p0 in zip(held, start, strict=True)]
    return model, moved, seen


def test_held_parameters_stay_until_the_first_fit_and_train_after_it():
    model, moved, seen = _held_run(2)
    # each layer's F-FC: input map, output map, the output's channel and position biases
    assert len(moved) == 8 * 4
    assert not any(moved)
    assert model.layer1.fc.output_map.weight.abs().max() == 0  # still silent at the fit
    assert seen[-1]["layer1.fc.output_map.weight"] > seen[0]["layer1.fc.output_map.weight"]
    _, moved, _ = _held_run(3)
    assert all(moved[1::4])  # every output map grows after the fit


def test_held_parameters_must_be_the_models_and_need_a_fit():
    model, loader = setup()
    with pytest.raises(ValueError, match="not trainable parameters of the model"):
        marglik_training(model, loader, held_until_fit=[torch.nn.Parameter(torch.zeros(1))])
    with pytest.raises(ValueError, match="this schedule has none"):
        marglik_training(
            model,
            loader,
            n_epochs=2,
            n_epochs_burnin=3,
            held_until_fit=model.non_equivariant_parameters(),
        )


def test_a_run_resumed_before_its_first_fit_still_holds(tmp_path):
    """Whether a parameter is held follows from the epoch, so a resume keeps holding it."""
    schedule = dict(n_epochs=4, n_epochs_burnin=3, marglik_frequency=1, n_hypersteps=2)

    def run(**options):
        model, loader = setup()
        model.start_equivariant_()
        marglik_training(
            model, loader, held_until_fit=model.non_equivariant_parameters(), **schedule, **options
        )
        return model

    straight = run()

    checkpoint = tmp_path / "run.pt"
    with pytest.raises(_Stop):
        run(checkpoint=checkpoint, callback=_stop_after(1))
    resumed = run(checkpoint=checkpoint)
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name


def test_a_run_resumed_with_another_held_set_is_refused(tmp_path):
    """The checkpoint names the held parameters: a resume that holds others (or none) would
    mix two schedules, so it stops before training, naming both sets; a checkpoint of an
    older version, with no record, resumes with a warning."""
    schedule = dict(n_epochs=4, n_epochs_burnin=3, marglik_frequency=1, n_hypersteps=2)

    model, loader = setup()
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(_Stop):
        marglik_training(
            model,
            loader,
            held_until_fit=model.non_equivariant_parameters(),
            checkpoint=checkpoint,
            callback=_stop_after(1),
            **schedule,
        )
    model, loader = setup()
    with pytest.raises(
        CheckpointError, match=r"held 32 parameter\(s\) \(layer1\.fc\..* holds nothing"
    ):
        marglik_training(model, loader, checkpoint=checkpoint, **schedule)
    layer1 = list(model.layer1.fc.parameters())
    with pytest.raises(CheckpointError, match="this run holds 4 parameter"):
        marglik_training(model, loader, held_until_fit=layer1, checkpoint=checkpoint, **schedule)
    saved = torch.load(checkpoint, weights_only=False)
    del saved["held_until_fit"]  # as an older version wrote it
    torch.save(saved, checkpoint)
    with pytest.warns(UserWarning, match="older version.*unchecked"):
        marglik_training(
            model,
            loader,
            held_until_fit=model.non_equivariant_parameters(),
            checkpoint=checkpoint,
            **schedule,
        )


def _reads_of_a_run(n_examples: int, **schedule) -> int:
    """Host reads of a ``marglik_training`` run with SGD (Adam counts its steps in CPU
    tensors, read on the host by design) over the first ``n_examples`` of :func:`setup`'s data."""
    model, loader = setup()
    x, y = loader.dataset.tensors
    data = DataLoader(TensorDataset(x[:n_examples], y[:n_examples]), batch_size=8)
    options = {"progress_bar": False, "final_laplace": False, "optimizer_cls": torch.optim.SGD}
    return host_reads(lambda: marglik_training(model, data, **options | schedule))


def test_a_training_step_reads_nothing_on_the_host():
    """The running loss, accuracy and the finiteness check stay on the device until the
    epoch ends, and the prior term's per-tensor sizes are copied there once (a read per step
    makes a GPU wait for every queued kernel)."""
    one, three = (_reads_of_a_run(n, n_epochs=1, n_epochs_burnin=2) for n in (8, 24))
    assert three == one


def test_counting_the_classes_of_the_burn_in_epoch_reads_nothing_per_step():
    """The class counts for the chance check add up on the device (one read per epoch)."""
    with pytest.warns(UserWarning, match="nothing is learned"), warnings.catch_warnings():
        warnings.simplefilter("ignore", NotLearningWarning)  # the random labels: at chance
        one, three = (
            _reads_of_a_run(n, n_epochs=1, n_epochs_burnin=1, marglik_frequency=5) for n in (8, 24)
        )
    assert three == one


def test_a_hyperparameter_step_reads_the_host_at_most_once():
    """Its value and the finiteness of it and of every gradient come back in one read."""
    one, three = (
        _reads_of_a_run(8, n_epochs=1, n_epochs_burnin=0, n_hypersteps=steps) for steps in (1, 3)
    )
    assert three - one <= 2


@pytest.mark.parametrize(
    "changed, named",
    [
        ({"optimizer_kwargs": {"lr": 1e-1}}, "optimizer_kwargs"),
        ({"hessian_structure": "diag"}, "hessian_structure: 'kron' -> 'diag'"),
        ({"scheduler_kwargs": {"T_max": 5}}, "scheduler_kwargs"),
        ({"n_hypersteps": 3}, "n_hypersteps: 2 -> 3"),
        ({"optimizer_cls": torch.optim.SGD}, "optimizer_cls: torch.optim.adam.Adam"),
    ],
    ids=["lr", "hessian", "scheduler", "hypersteps", "optimizer"],
)
def test_a_resume_with_changed_settings_is_refused_naming_them(tmp_path, changed, named):
    """Each was accepted and ignored: the run went on with the checkpoint's settings."""
    checkpoint = tmp_path / "run.pt"
    saved = SCHEDULE | {
        "optimizer_kwargs": {"lr": 1e-2},
        "scheduler_cls": torch.optim.lr_scheduler.CosineAnnealingLR,
        "scheduler_kwargs": {"T_max": 12},
    }
    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(2), **saved)
    model, loader = setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=f"other settings \\(.*{re.escape(named)}"):
        marglik_training(model, loader, checkpoint=checkpoint, **saved | changed)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_resume_on_another_number_of_training_examples_is_refused(tmp_path):
    """N weighs the prior in the loss; a resume on 16 of the 24 examples went on silently."""
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(2), **SCHEDULE)
    assert torch.load(checkpoint, weights_only=False)["n_data"] == 24
    fewer = DataLoader(torch.utils.data.Subset(loader.dataset, range(16)), batch_size=8)
    with pytest.raises(CheckpointError, match="on 24 training examples.*yields 16"):
        marglik_training(model, fewer, checkpoint=checkpoint, **SCHEDULE)
    saved = torch.load(checkpoint, weights_only=False)
    del saved["n_data"]  # as an older version wrote it
    torch.save(saved, checkpoint)
    with pytest.warns(UserWarning, match="did not record the size of its training set"):
        marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE)


def test_a_resume_shorter_than_the_checkpoint_or_with_another_prior_structure_is_refused(
    tmp_path,
):
    """n_epochs=2 on a 3-epoch checkpoint returned the 3-epoch run; a scalar prior resumed as
    layerwise failed inside Adam with a shape error."""
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"n_epochs": 3})
    with pytest.raises(CheckpointError, match="holds epoch 3, past this run's n_epochs=2"):
        marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"n_epochs": 2})
    scalar = tmp_path / "scalar.pt"
    marglik_training(model, loader, checkpoint=scalar, prior_structure="scalar", **SCHEDULE)
    with pytest.raises(CheckpointError, match="prior_structure: 'scalar' -> 'layerwise'"):
        marglik_training(model, loader, checkpoint=scalar, prior_structure="layerwise", **SCHEDULE)
    saved = torch.load(scalar, weights_only=False)
    del saved["settings"]  # as an older version wrote it: the shape check still refuses
    torch.save(saved, scalar)
    with (
        pytest.warns(UserWarning, match="did not record its settings"),
        pytest.raises(CheckpointError, match="holds 1 prior precision\\(s\\), this run 52"),
    ):
        marglik_training(model, loader, checkpoint=scalar, prior_structure="layerwise", **SCHEDULE)


def test_a_resumed_runs_progress_bar_counts_the_whole_runs_epochs(tmp_path, capsys):
    """It showed the remaining epochs as a run of their own (2/2 for epochs 3-4 of 4)."""
    checkpoint = tmp_path / "run.pt"
    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(model, loader, checkpoint=checkpoint, callback=_stop_after(2), **SCHEDULE)
    capsys.readouterr()
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **SCHEDULE | {"progress_bar": True})
    bar = capsys.readouterr().err
    assert "2/4" in bar and "4/4" in bar and "/2 " not in bar


def test_a_resume_with_the_same_scheduler_function_is_not_refused(tmp_path):
    """A function's repr holds its address, new in every process: recorded by name instead."""
    checkpoint = tmp_path / "run.pt"

    def schedule():
        return SCHEDULE | {
            "scheduler_cls": torch.optim.lr_scheduler.LambdaLR,
            "scheduler_kwargs": {"lr_lambda": lambda step: 1.0 / (1 + step)},
        }

    model, loader = setup()
    with pytest.raises(_Stop):
        marglik_training(
            model, loader, checkpoint=checkpoint, callback=_stop_after(2), **schedule()
        )
    model, loader = setup()
    marglik_training(model, loader, checkpoint=checkpoint, **schedule())  # resumes, no error


def test_a_map_run_holds_its_paths_until_the_epoch_it_is_told():
    """held_until_epoch: a MAP run (no fit) holds the silenced FC paths through epoch 2, as a
    learning run of burn-in 2 would, and trains them from epoch 3 on."""
    model, loader = setup()
    model.start_equivariant_()
    held = model.non_equivariant_parameters()
    snapshots = [[p.detach().clone() for p in held]]

    def record(epoch, info):
        snapshots.append([p.detach().clone() for p in held])

    marglik_training(
        model,
        loader,
        n_epochs=3,
        n_epochs_burnin=4,
        held_until_fit=held,
        held_until_epoch=2,
        callback=record,
    )
    start, after_1, after_2, after_3 = snapshots
    for kept in (after_1, after_2):
        assert all(torch.equal(a, b) for a, b in zip(start, kept, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(after_2, after_3, strict=True))
    with pytest.raises(ValueError, match="held_until_epoch must be a positive epoch"):
        marglik_training(model, loader, n_epochs=1, held_until_fit=held, held_until_epoch=0)
