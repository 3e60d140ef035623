"""Relaxed layers against a stock CNN: epochs, Kron fits, training runs and their operators.

For CONV, F-FC+CONV and F-FC+CONV+GCONV against a stock PyTorch CNN of the same widths
(App. F.1: zero-padded ``nn.Conv2d``, polyphase subsampling after layers 2, 4, 6, 7, 8, the
two-layer head), in one process, on random 3x32x32 inputs with 10 classes held on the device
(speed does not depend on the data):

1. a training epoch (forward, backward, SGD step over N, batch ``--batch``): the median of
   ``--repeats`` epochs after a warm-up epoch;
2. ``Laplace.fit`` (``subset_of_weights="all"``, ``"kron"``) over the same N with the exact
   GGN and with the Monte-Carlo Fisher (one sample): ``EquivariantKFAC`` for the package's
   models, laplace-torch's ``AsdlGGN`` for the stock CNN; the median of ``--repeats`` fits
   after a warm-up fit, also at every N of ``--small-n``; on a GPU, where
   ``EquivariantKFAC`` by default concatenates the loader's batches into passes of up to
   4,096 rows (:mod:`laplace_equivariance.curvature.fit_passes`), also both fits batch by
   batch (``fit_batch_size=--batch``), for models with block-diagonal factors (F-FC) both fits
   with their eigenvalues computed by the GPU's eigensolver (``host_eigenvalues=False``;
   the default computes them on the host's threads), and with ``--separate-classes`` the
   exact GGN with its ``K - 1`` class passes run separately (``batched_classes=False``);
3. a marginal-likelihood training run (:func:`laplace_equivariance.marglik_training`,
   ``--train-epochs`` epochs, fits every 5 epochs from epoch 5 with 20 hyperparameter steps,
   Monte-Carlo Fisher and exact GGN) against MAP training of the same model by the same
   function (no fit), for the package's models;
4. peak GPU memory of the epoch and of each fit (``torch.cuda.max_memory_allocated``);
5. with ``torch.profiler``, one training step and one fit over one batch of
   ``--profile-batch`` examples, and one step of :func:`marglik_training`'s epoch (prior term,
   running loss, Adam): the top-level ``aten::`` operators (the same on every device:
   each costs Python and dispatcher time, and on a GPU at least one kernel launch), the host
   synchronisation points among them (``aten::_local_scalar_dense``: ``.item()``, ``float()``
   and ``bool()`` of a tensor; ``aten::nonzero``), and on CUDA the kernel launches and the CUDA
   runtime's synchronisation calls; the wall-clock milliseconds of the profiled call, the
   operators with the most host time (self CPU time) and, on CUDA, the kernels' summed
   device time (``kernel_ms``: kernels alone; reports before this definition summed the
   operators' device time with their kernels' and the profiler's own records, an over-count
   kept as ``device_ms_overcounted``) and the kernels with the most (a device time far
   below the wall time: the GPU waits for the host);
6. with ``--compile-mode MODE``, after every model's other figures are written (so that a
   time limit cuts compilation alone), per model a fresh model's epoch under
   ``torch.compile`` in that mode against its eager epoch in the same call, the first
   (compiling) epoch's time, and for the package's models MAP and MC marginal-likelihood
   training runs with :func:`marglik_training`'s ``compile_kwargs`` (``reduce-overhead``:
   CUDA graphs, which replay a step's kernels without the host launching each).

Targets (issue 41; ratios, so that they hold across cards): on a GPU at N = 4,096, CONV epoch
<= 1.2x the stock CNN's, F-FC+CONV exact fit <= 4 epochs and MC fit <= 1.5 (at N = 512 at most
twice those), marginal-likelihood training of F-FC+CONV with the MC Fisher <= 1.5x its MAP
training; on the CPU at N = 512 exact fit <= 5 epochs, MC fit <= 1.5; operators per training
step of CONV <= 1.5x the stock CNN's.

Usage (from the repository root):
    python -m benchmarks.gpu_speed [--device cpu|cuda] [--n 4096] [--small-n 512] [--batch 128]
        [--models stock-cnn conv f-fc+conv f-fc+conv+gconv] [--repeats 3] [--train-epochs 10]
        [--compile-mode default|reduce-overhead] [--out benchmarks/results/gpu_speed-cpu.json]
"""

from __future__ import annotations

import collections
import functools
import statistics
import time
from collections.abc import Callable

import torch
from laplace import Laplace
from laplace.curvature import AsdlGGN
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader

from benchmarks.report import benchmark_parser, environment, write
from benchmarks.timing import loader, seconds, synchronise
from laplace_equivariance import EquivariantKFAC, marglik_training, models
from laplace_equivariance.layers import PolyphaseSubsample2d
from laplace_equivariance.models import SUBSAMPLING_LAYERS, WIDTH_MULTIPLIERS

N_CLASSES = 10
"""Classes of the random labels."""

STOCK = "stock-cnn"
"""The stock PyTorch CNN's name among the models."""

BLOCK_DIAGONAL = ("f-fc+conv", "f-fc+conv+gconv")
"""The measured models whose Kron fits have block-diagonal factors (F-FC paths): their
eigenvalues go to the host by default (``EquivariantKFAC(host_eigenvalues=True)``)."""

SYNC_OPERATORS = ("aten::_local_scalar_dense", "aten::nonzero")
"""Operators that wait for the device: a tensor's value read on the host (``.item()``,
``float()``, ``bool()``, ``int()``) and ``nonzero`` (its output size is data dependent)."""

CUDA_LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
"""CUDA runtime and driver calls that launch a kernel."""

CUDA_SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
"""CUDA runtime calls that block the host until the device is done."""

TOP = 12
"""Operators (host time) and kernels (device time) listed per profiled step or fit."""

PROFILER_ACTIVITIES = ("Activity Buffer Request", "Buffer Flush")
"""The profiler's own device-side records, not kernels of the measured code."""

TARGETS = {
    "conv_epoch_over_stock": 1.2,
    "exact_fit_over_epoch": 4.0,
    "mc_fit_over_epoch": 1.5,
    "small_n_factor": 2.0,
    "mc_training_over_map": 1.5,
    "cpu_exact_fit_over_epoch": 5.0,
    "cpu_mc_fit_over_epoch": 1.5,
    "conv_operators_over_stock": 1.5,
}
"""Issue 41's targets (the ``cpu_`` ones at N = 512 on the CPU, the others on a GPU)."""


def stock_cnn(in_channels: int, n_classes: int, alpha: int) -> nn.Sequential:
    """App. F.1's CONV network from stock layers: zero-padded convolutions, APS, the head."""
    layers: list[nn.Module] = []
    c_in = in_channels
    for index, multiplier in enumerate(WIDTH_MULTIPLIERS, start=1):
        c_out = alpha * multiplier
        layers.append(nn.Conv2d(c_in, c_out, 3, padding=1))
        if index in SUBSAMPLING_LAYERS:
            layers.append(PolyphaseSubsample2d())
        layers.append(nn.ReLU())
        c_in = c_out
    head = [nn.Flatten(), nn.Linear(c_in, 4 * c_in), nn.ReLU(), nn.Linear(4 * c_in, n_classes)]
    return nn.Sequential(*layers, *head)


def build(name: str, alpha: int) -> nn.Module:
    """The stock CNN or one of the package's models, at width ``alpha``."""
    torch.manual_seed(0)
    if name == STOCK:
        return stock_cnn(3, N_CLASSES, alpha)
    return models.build(name, (3, 32, 32), N_CLASSES, alpha=alpha)


def peak_mib(run: Callable[[], object], device: str) -> float | None:
    """Peak GPU memory allocated during ``run()`` in MiB (None on the CPU)."""
    if not device.startswith("cuda"):
        run()
        return None
    synchronise(device)
    torch.cuda.reset_peak_memory_stats()
    run()
    synchronise(device)
    return torch.cuda.max_memory_allocated() / 2**20


def training_step(model: nn.Module, optimizer: torch.optim.Optimizer) -> Callable:
    """One step: zero the gradients, forward, cross-entropy, backward, optimiser step."""

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


def epoch(model: nn.Module, data: DataLoader) -> Callable[[], None]:
    """A training epoch over ``data`` (SGD, lr 1e-3: the step's cost, not its result)."""
    step = training_step(model, torch.optim.SGD(model.parameters(), lr=1e-3))

    def run() -> None:
        model.train()
        for x, y in data:
            step(x, y)

    return run


def fit(model: nn.Module, data: DataLoader, stochastic: bool, **options) -> Callable[[], Laplace]:
    """``Laplace.fit`` over ``data``: EquivariantKFAC, or AsdlGGN for the stock CNN.

    ``options`` are EquivariantKFAC's (``batched_classes``, ``fit_batch_size``,
    ``host_eigenvalues``; its defaults otherwise), ignored for the stock CNN.
    """
    stock = isinstance(model, nn.Sequential)
    backend_kwargs = {"stochastic": True} if stochastic else {}
    if not stock:
        backend_kwargs |= options

    def run() -> Laplace:
        la = Laplace(
            model,
            "classification",
            subset_of_weights="all",
            hessian_structure="kron",
            backend=AsdlGGN if stock else EquivariantKFAC,
            backend_kwargs=backend_kwargs or None,
        )
        la.fit(data)
        return la

    return run


def median_seconds(run: Callable[[], object], device: str, repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``run`` after one warm-up call."""
    run()
    return statistics.median(seconds(run, device) for _ in range(repeats))


def operators(run: Callable[[], object], device: str) -> dict[str, int]:
    """Top-level ``aten::`` operators, host synchronisations and (CUDA) kernel launches."""
    run()  # warm-up: one-time allocations and lazy initialisation stay out of the counts
    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as trace:
        start = time.perf_counter()
        run()
        synchronise(device)
        wall = time.perf_counter() - start
    counts: collections.Counter[str] = collections.Counter()
    top_level = 0
    for event in trace.events():
        counts[event.name] += 1
        if event.name.startswith("aten::"):
            parent = event.cpu_parent
            while parent is not None and not parent.name.startswith("aten::"):
                parent = parent.cpu_parent
            top_level += parent is None
    result = {
        "aten_top_level": top_level,
        "host_syncs": sum(counts[name] for name in SYNC_OPERATORS),
        "wall_ms": wall * 1e3,
        "top_host_ms": top(trace.key_averages(), "self_cpu_time_total"),
    }
    if device.startswith("cuda"):
        result["kernel_launches"] = sum(counts[name] for name in CUDA_LAUNCHES)
        result["cuda_syncs"] = sum(counts[name] for name in CUDA_SYNCS)
        kernels = [
            event
            for event in trace.key_averages()
            if event.device_type == DeviceType.CUDA and event.key not in PROFILER_ACTIVITIES
        ]
        result["kernel_ms"] = sum(event.self_device_time_total for event in kernels) / 1e3
        result["top_kernel_ms"] = top(kernels, "self_device_time_total")
    return result


def top(events: list, key: str, n: int = TOP) -> list[list]:
    """The ``n`` profiler events with the largest ``key`` (microseconds): name, calls, ms."""
    largest = sorted(events, key=lambda event: -getattr(event, key))[:n]
    return [[event.key, event.count, getattr(event, key) / 1e3] for event in largest]


def training_run(
    model: nn.Module,
    data: DataLoader,
    epochs: int,
    learn: bool,
    stochastic: bool,
    compile_kwargs: dict | None = None,
) -> None:
    """:func:`marglik_training` for ``epochs`` epochs, with fits every 5 from epoch 5 or none
    (its MAP steps compiled with ``compile_kwargs`` if given)."""
    marglik_training(
        model,
        data,
        n_epochs=epochs,
        n_epochs_burnin=5 if learn else epochs + 1,
        marglik_frequency=5,
        n_hypersteps=20,
        optimizer_kwargs={"lr": 1e-3},
        stochastic=stochastic,
        final_laplace=False,
        compile_kwargs=compile_kwargs,
    )


def trainer_step_operators(name: str, alpha: int, device: str, batch: int) -> dict[str, int]:
    """One step of :func:`marglik_training`'s MAP epoch: a two-batch epoch less a one-batch one.

    The trainer's step adds the prior term, the running loss and accuracy and the optimiser
    (Adam) to :func:`training_step`'s; the difference leaves out what an epoch does once.
    """
    counts = []
    for n_batches in (1, 2):
        model = build(name, alpha).to(device)
        data = loader(n_batches * batch, batch, device)
        run = functools.partial(training_run, model, data, 1, False, False)
        counts.append(operators(run, device))
    counted = ("aten_top_level", "host_syncs", "kernel_launches", "cuda_syncs")
    return {key: counts[1][key] - counts[0][key] for key in counted if key in counts[0]}


def measure(name: str, args, device: str) -> dict:
    """Every figure of one model."""
    alpha = args.gconv_alpha if "gconv" in name else args.alpha
    model = build(name, alpha).to(device)
    data = loader(args.n, args.batch, device)
    row: dict = {"model": name, "alpha": alpha, "n": args.n}
    row["parameters"] = sum(p.numel() for p in model.parameters())
    run_epoch = epoch(model, data)
    row["epoch_s"] = median_seconds(run_epoch, device, args.repeats)
    row["epoch_peak_mib"] = peak_mib(run_epoch, device)
    progress(name, "epoch", row["epoch_s"])
    fits: list[tuple[str, bool, dict]] = [("exact", False, {}), ("mc", True, {})]
    if device.startswith("cuda") and name != STOCK:  # the defaults there differ from the CPU's
        by_batch = {"fit_batch_size": args.batch}
        fits += [("exact_batch_by_batch", False, by_batch), ("mc_batch_by_batch", True, by_batch)]
        if args.separate_classes:
            fits.append(("exact_separate_classes", False, {"batched_classes": False, **by_batch}))
        if name in BLOCK_DIAGONAL:
            on_device = {"host_eigenvalues": False}
            fits += [
                ("exact_device_eigenvalues", False, on_device),
                ("mc_device_eigenvalues", True, on_device),
            ]
    for kind, stochastic, options in fits:
        run_fit = fit(model, data, stochastic, **options)
        fit_s = median_seconds(run_fit, device, args.repeats)
        row[kind] = {
            "fit_s": fit_s,
            "fit_over_epoch": fit_s / row["epoch_s"],
            "peak_mib": peak_mib(run_fit, device),
        }
        progress(name, kind, row[kind])
    row["small_n"] = []
    small_fits = [
        (kind, stochastic, options)
        for kind, stochastic, options in fits
        if kind in ("exact", "mc", "exact_device_eigenvalues", "mc_device_eigenvalues")
    ]
    for n in args.small_n:
        small = loader(n, args.batch, device)
        small_epoch = median_seconds(epoch(model, small), device, args.repeats)
        entry = {"n": n, "epoch_s": small_epoch}
        for kind, stochastic, options in small_fits:
            fit_s = median_seconds(fit(model, small, stochastic, **options), device, args.repeats)
            entry[kind] = {"fit_s": fit_s, "fit_over_epoch": fit_s / small_epoch}
        row["small_n"].append(entry)
        progress(name, f"n={n}", entry)
    batch = loader(args.profile_batch, args.profile_batch, device)
    x, y = next(iter(batch))
    step = training_step(model, torch.optim.SGD(model.parameters(), lr=1e-3))
    row["operators"] = {
        "training_step": operators(lambda: step(x, y), device),
        "trainer_step": trainer_step_operators(name, alpha, device, args.profile_batch),
        "exact_fit": operators(fit(model, batch, False), device),
        "mc_fit": operators(fit(model, batch, True), device),
    }
    if name != STOCK and args.train_epochs:
        runs = {}
        for kind, learn, stochastic in (
            ("map", False, False),
            ("marglik_mc", True, True),
            ("marglik_exact", True, False),
        ):
            fresh = build(name, alpha).to(device)
            run = functools.partial(training_run, fresh, data, args.train_epochs, learn, stochastic)
            runs[kind] = seconds(run, device)
            progress(name, f"training {kind}", runs[kind])
        row["training"] = {
            "epochs": args.train_epochs,
            **{f"{kind}_s": value for kind, value in runs.items()},
            "mc_over_map": runs["marglik_mc"] / runs["map"],
            "exact_over_map": runs["marglik_exact"] / runs["map"],
        }
    return row


def compiled(name: str, alpha: int, data: DataLoader, args, device: str) -> dict:
    """Epochs, and for the package's models training runs, under ``torch.compile``.

    The epoch of a fresh model compiled with ``mode=--compile-mode`` (the median of
    ``--repeats`` after a warm-up epoch, which compiles) against the eager epoch of the same
    fresh model in the same call; for the package's models MAP and MC marginal-likelihood
    training with :func:`marglik_training`'s ``compile_kwargs`` (compilation included, as a
    user pays it). A compilation that fails is recorded, not raised.
    """
    options = {"mode": args.compile_mode}
    result: dict = {"mode": args.compile_mode}
    try:
        model = build(name, alpha).to(device)
        result["eager_epoch_s"] = median_seconds(epoch(model, data), device, args.repeats)
        compiled_epoch = epoch(torch.compile(model, **options), data)
        result["compile_s"] = seconds(compiled_epoch, device)
        result["epoch_s"] = median_seconds(compiled_epoch, device, args.repeats)
        result["epoch_over_eager"] = result["epoch_s"] / result["eager_epoch_s"]
        if name != STOCK and args.train_epochs:
            for kind, learn, stochastic in (("map", False, False), ("marglik_mc", True, True)):
                fresh = build(name, alpha).to(device)
                run = functools.partial(
                    training_run, fresh, data, args.train_epochs, learn, stochastic, options
                )
                result[f"{kind}_s"] = seconds(run, device)
    except Exception as error:  # a compiler failure is a finding, not the end of the run
        result["error"] = f"{type(error).__name__}: {str(error)[:500]}"
    return result


def progress(model: str, what: str, value) -> None:
    """One line on the console as each figure is measured (a stopped run shows how far)."""
    print(f"  {model} {what}: {value}", flush=True)


def summary(rows: list[dict]) -> dict:
    """The ratios issue 41's targets are stated in, where their rows were measured."""
    by_name = {row["model"]: row for row in rows}
    result = {}
    stock, conv = by_name.get(STOCK), by_name.get("conv")
    if stock and conv:
        result["conv_epoch_over_stock"] = conv["epoch_s"] / stock["epoch_s"]
        result["conv_operators_over_stock"] = (
            conv["operators"]["training_step"]["aten_top_level"]
            / stock["operators"]["training_step"]["aten_top_level"]
        )
    return result


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--small-n", type=int, nargs="*", default=[512])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--profile-batch", type=int, default=32)
    parser.add_argument("--alpha", type=int, default=10)
    parser.add_argument("--gconv-alpha", type=int, default=2, help="Table 3's width")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-epochs", type=int, default=10)
    parser.add_argument(
        "--separate-classes",
        action="store_true",
        help="on a GPU also the exact fit with its K - 1 class passes apart, batch by batch",
    )
    parser.add_argument(
        "--models", nargs="+", default=[STOCK, "conv", "f-fc+conv", "f-fc+conv+gconv"]
    )
    parser.add_argument(
        "--compile-mode",
        dest="compile_mode",
        choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs"],
        help="also time epochs and training runs under torch.compile in this mode",
    )
    args = parser.parse_args()
    report = {
        **environment("-m benchmarks.gpu_speed", args.device),
        "n": args.n,
        "batch": args.batch,
        "classes": N_CLASSES,
        "repeats": args.repeats,
        "profile_batch": args.profile_batch,
        "targets": TARGETS,
        "rows": [],
    }
    for name in args.models:
        row = measure(name, args, args.device)
        report["rows"].append(row)
        print(
            f"{name:16} epoch {row['epoch_s']:.3f} s, exact fit {row['exact']['fit_s']:.3f} s "
            f"({row['exact']['fit_over_epoch']:.1f}x), MC fit {row['mc']['fit_s']:.3f} s "
            f"({row['mc']['fit_over_epoch']:.1f}x), operators {row['operators']}",
            flush=True,
        )
        if "training" in row:
            print(f"{'':16} training {row['training']}", flush=True)
        report["summary"] = summary(report["rows"])
        write(report, args.out)
    # after every model's eager figures are written, so a time limit cuts compilation alone
    for row in report["rows"] if args.compile_mode else []:
        name = row["model"]
        data = loader(args.n, args.batch, args.device)
        row["compiled"] = compiled(name, row["alpha"], data, args, args.device)
        progress(name, f"compiled ({args.compile_mode})", row["compiled"])
        write(report, args.out)


if __name__ == "__main__":
    main()
