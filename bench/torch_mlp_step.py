#!/usr/bin/python3
"""torch_mlp_step.py — PyTorch's side of bench_mlp_step: the same MLP training
step, and the same GEMM shapes, timed the same way, printed as one JSON object.

Single-threaded (torch.set_num_threads(1)), float32, like dpt, whose Eigen
GEMMs run on one thread (in dpt the ranks are the parallelism). bench_mlp_step
runs this script itself; by hand:

    /usr/bin/python3 bench/torch_mlp_step.py --model 784-256-10 --batch 32,64 --seconds 1

Timing: warm up, then `repeats` windows of seconds/repeats each; a window's
time per call is its wall time over its calls, and the median window is kept.
The step is: forward, cross-entropy, backward, SGD step, zero_grad — as dpt's.
Exit status 77 when torch is not importable.
"""
import argparse
import json
import os
import statistics
import sys
import time

# One thread for every BLAS torch might be linked to, before torch loads it.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

try:
    import torch
except ImportError as error:
    print(json.dumps({"error": f"torch not importable: {error}"}))
    sys.exit(77)


def blas_library():
    """The BLAS torch's float32 GEMMs run on. Debian's torch calls whatever
    libblas.so.3 resolves to (netlib's reference BLAS unless OpenBLAS, BLIS or
    MKL is installed), which decides most of its speed here."""
    config = torch.__config__.show()
    if "BLAS_INFO=mkl" in config:
        return "MKL (built in)"
    try:
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "blas" in line.lower() or "libmkl" in line}
    except OSError:
        libs = set()
    libs = sorted(os.path.realpath(lib) for lib in libs if lib.startswith("/"))
    for lib in libs:
        for name in ("openblas", "blis", "mkl", "atlas"):
            if name in lib:
                return f"{name} ({lib})"
    for lib in libs:
        if "/blas/libblas" in lib:
            return f"netlib reference ({lib})"
    return ", ".join(libs) or "unknown"


def median_seconds(fn, seconds, repeats):
    """Median over `repeats` windows of the mean time per call of fn()."""
    warm_until = time.perf_counter() + min(0.2, 0.25 * seconds)
    fn()
    while time.perf_counter() < warm_until:
        fn()
    window = seconds / repeats
    times = []
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= window:
                break
        times.append(elapsed / calls)
    return statistics.median(times)


def gemm_shapes(widths, batch):
    """The GEMMs one training step runs, as (name, a, b) with c = a·b.
    Layer 0's input gradient dy·W0 is not among them: x needs no gradient."""
    shapes = []
    for layer, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        x, w, dy = torch.randn(batch, fan_in), torch.randn(fan_out, fan_in), torch.randn(batch, fan_out)
        shapes.append((f"fc{layer} forward x.Wt", x, w.t()))
        if layer > 0:
            shapes.append((f"fc{layer} backward dy.W", dy, w))
        shapes.append((f"fc{layer} backward dyt.x", dy.t(), x))
    return shapes


def bench_batch(widths, batch, seconds, repeats):
    layers = []
    for k, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if k + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, widths[0])
    y = torch.randint(0, widths[-1], (batch,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    forward_flops = sum(2.0 * batch * i * o for i, o in zip(widths, widths[1:]))
    step_s = median_seconds(step, seconds / 2, repeats)

    gemm_flops, gemm_s = 0.0, 0.0
    shapes = gemm_shapes(widths, batch)
    for _, a, b in shapes:
        out = torch.empty(a.shape[0], b.shape[1])
        t = median_seconds(lambda: torch.mm(a, b, out=out), seconds / 2 / len(shapes), repeats)
        gemm_flops += 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        gemm_s += t
    return {"batch": batch, "step_s": step_s, "step_gflops": 3 * forward_flops / step_s / 1e9,
            "gemm_gflops": gemm_flops / gemm_s / 1e9, "gemm_s": gemm_s}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="784-256-10")
    parser.add_argument("--batch", default="32,64,128,256")
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per batch size")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    widths = [int(w) for w in args.model.split("-")]
    results = [bench_batch(widths, int(b), args.seconds, args.repeats) for b in args.batch.split(",")]
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "blas": blas_library(), "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
