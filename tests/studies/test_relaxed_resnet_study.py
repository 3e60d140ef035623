"""``studies/relaxed_resnet_study.py``: a run's complete results.json, resume, the table."""

import json

import pytest
import torch

from studies import relaxed_resnet_study as study

TINY = [
    "--source",
    "mnist",
    "--paths",
    "s-fc",
    "--subset",
    "16",
    "--test-subset",
    "8",
    "--epochs",
    "1",
]
TINY += ["--burnin", "1", "--frequency", "1", "--hypersteps", "1", "--batch-size", "16"]
TINY += ["--relax", "layer3.1.conv2", "layer4", "--seeds", "0", "--tasks", "item-quadrant"]
TINY += ["--threads", "2"]
"""One epoch on 16 offline MNIST digits, one fit (and the final one), S-FC on one convolution of
layer3 and on the last stage (named and by stage); two threads, on which the fits' eigenvalues
(most of the time: ResNet-18's factors) run in parallel."""


@pytest.fixture(scope="module")
def study_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("relaxed-resnet")
    arms = ["--arms", "map-original", "learned-relaxed"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert study.main([*TINY, *arms, "--out", str(out)]) == 0
        assert torch.get_num_threads() == 1  # the runs' two threads are not left behind
    finally:
        torch.set_num_threads(threads)
    return out


def test_a_run_writes_a_complete_results_file(study_folder):
    result = json.loads(
        (study_folder / "item-quadrant-learned-relaxed-seed0" / "results.json").read_text()
    )
    assert result["settings"] == json.loads((study_folder / "settings.json").read_text())
    assert result["budget"] == {
        "train_images": 16,
        "test_images": 8,
        "epochs": 1,
        "fits": 2,
        "fit_epochs": [1],
        "batch_size": 16,
        "fisher": "mc",
        "kfac": "reduce",
    }
    assert result["threads"] == 2
    for key in ("device", "threads", "package_version", "package_commit", "evaluated_epoch"):
        assert result[key] not in (None, "")
    assert set(result["test"]) == {"accuracy", "nll"}
    layers = ["layer3.1.conv2", "layer4.0.conv1", "layer4.0.conv2", "layer4.0.downsample.0"]
    assert set(result["fc_shares"]) == {*layers, "layer4.1.conv1", "layer4.1.conv2"}
    assert [row["layer"] for row in result["symmetry_report"]["layers"]] == list(
        result["fc_shares"]
    )
    fc = result["symmetry_report"]["layers"][0]["paths"]["fc"]
    assert fc["prior_precision"] and fc["prior_precision"][0] > 0
    folded = result["fold"]
    assert set(folded) == {"threshold", "kept_fc", "parameters", "test"}
    assert (
        result["parameters"]["original"] <= folded["parameters"] <= result["parameters"]["trained"]
    )
    original = json.loads(
        (study_folder / "item-quadrant-map-original-seed0" / "results.json").read_text()
    )
    assert "fold" not in original and original["budget"]["fits"] == 0
    assert original["parameters"]["trained"] == original["parameters"]["original"]


def test_finished_runs_are_skipped_and_other_settings_refused(study_folder, capsys):
    arms = ["--arms", "map-original"]
    assert study.main([*TINY, *arms, "--out", str(study_folder)]) == 0
    assert "item-quadrant-map-original-seed0: done, skipped" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="other settings .*epochs"):
        study.main([*TINY, "--epochs", "2", *arms, "--out", str(study_folder)])


def test_the_table_and_figure_are_read_from_the_results_files(study_folder, tmp_path):
    figure = tmp_path / "shares.png"
    text = study.table(study_folder, figure)
    assert "| item-quadrant | map-original | 0 |" in text
    assert "| item-quadrant | learned-relaxed | 0 |" in text
    assert "| layer4.1.conv2 |" in text
    assert "16 training images, 8 test images, 1 epochs, batches of 16" in text
    assert "learned arm: 2 fits (mc Fisher, KFAC-reduce) after epochs 1 and a final one" in text
    assert "Missing runs:" in text and "item-map-relaxed-seed0" in text and "seed2" in text
    assert figure.stat().st_size > 0


def test_the_page_reads_its_figures_from_the_frames(study_folder):
    frame = study.load_results(study_folder)
    learned = study.runs_of(frame, "item-quadrant", "learned-relaxed")
    assert list(study.summary_table(frame)["arm"]) == ["map-original", "learned-relaxed"]
    seeds = study.seeds_table(frame)
    assert list(seeds.loc[seeds["arm"] == "map-original", "folded accuracy (%)"]) == ["-"]
    shares = study.shares_table(frame)  # the map-original arm has no FC path to share
    assert list(shares.columns) == ["layer", "item-quadrant, learned-relaxed"]
    assert study.shares(learned, "layer4.1.conv2") == [
        learned["fc_shares"].iloc[0]["layer4.1.conv2"]
    ]
    result = json.loads(
        (study_folder / "item-quadrant-learned-relaxed-seed0" / "results.json").read_text()
    )
    layer4 = next(
        layer for layer in result["symmetry_report"]["layers"] if layer["layer"] == "layer4.1.conv2"
    )
    conv = study.precisions(learned, "conv", "layer4.1.conv2")
    assert conv == [layer4["paths"]["conv"]["prior_precision"][0]]
    assert len(study.precisions(learned, "fc")) == len(result["symmetry_report"]["layers"])
    assert study.precisions(study.runs_of(frame, "item-quadrant", "map-original"), "conv") == []
    assert study.millions([11_188_200.0, float("nan"), 19_577_336.0]) == "11.19-19.58"


def _results_file(folder, task, arm, seed, accuracy, train_accuracies):
    """A results.json with what :func:`study.load_results` reads (no training)."""
    run = folder / f"{task}-{arm}-seed{seed}"
    run.mkdir(parents=True)
    result = {
        "task": task,
        "arm": arm,
        "seed": seed,
        "test": {"accuracy": accuracy, "nll": 1.0},
        "evaluated_epoch": len(train_accuracies),
        "train_seconds": 60.0,
        "parameters": {"original": 10, "trained": 10},
        "budget": {},
        "epochs": [{"epoch": i + 1, "accuracy": a} for i, a in enumerate(train_accuracies)],
    }
    (run / "results.json").write_text(json.dumps(result))


def test_the_frame_has_the_last_epochs_training_accuracy(tmp_path):
    _results_file(tmp_path, "item", "map-original", 0, 0.3, [0.1, 0.25])
    _results_file(tmp_path, "item", "map-relaxed", 0, 0.3, [])
    frame = study.load_results(tmp_path)
    assert frame["train_accuracy"].iloc[0] == pytest.approx(25.0)
    assert frame["train_accuracy"].isna().iloc[1]


def test_accuracy_spreads_set_the_arms_differences_against_their_spreads(tmp_path):
    accuracies = {
        ("item", "map-original"): (0.20, 0.30),  # mean 25, std 7.07
        ("item", "map-relaxed"): (0.28, 0.30),  # mean 29, the better MAP arm, std 1.41
        ("item", "learned-relaxed"): (0.29, 0.31),  # mean 30: met, inside
        ("item-quadrant", "map-original"): (0.10, 0.12),  # mean 11, std 1.41
        ("item-quadrant", "learned-relaxed"): (0.30, 0.30),  # mean 30: above the spread
    }
    for (task, arm), values in accuracies.items():
        for seed, accuracy in enumerate(values):
            _results_file(tmp_path, task, arm, seed, accuracy, [accuracy])
    spreads = study.accuracy_spreads(study.load_results(tmp_path)).set_index("task")
    item, quadrant = spreads.loc["item"], spreads.loc["item-quadrant"]
    assert item["spread"] == pytest.approx(100 * 0.1 / 2**0.5)
    assert item["gap"] == pytest.approx(5.0) and item["better"] == "map-relaxed"
    assert item["better_mean"] == pytest.approx(29.0) and item["learned"] == pytest.approx(30.0)
    assert item["met"] and item["inside"]
    assert quadrant["gap"] == pytest.approx(19.0) and quadrant["better"] == "map-original"
    assert quadrant["met"] and not quadrant["inside"]
