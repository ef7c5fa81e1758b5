#!/usr/bin/env python3
"""torch_step.py — PyTorch's side of bench_gpu_step: the same MLP training
step on one GPU, eager and replayed as a CUDA graph, timed the same way, as JSON.

The step: forward, cross-entropy, backward, SGD step (fp32, TF32 off), as dpt's.
Initial weights and data differ from dpt's: only the time is compared. Also
times torch.mm at the step's GEMM shapes (PyTorch's view of cuBLAS, a cross-check
of bench_gpu_step's SGEMM column).

Timing: torch.cuda.Event pairs around a window of calls (about --window-ms)
after a warm-up; the median of --repeats windows.

    python3 bench/torch_step.py                                  # the issue's two shapes
    python3 bench/torch_step.py --config 784-256-10@64 --json torch.json

Without torch or without a CUDA device it writes {"skipped": reason} and exits 0;
bench/gpu_compare.py reports that.
"""
import argparse
import json
import statistics
import sys


def parse_config(spec):
    """'784-256-10@256' -> ([784, 256, 10], 256)."""
    widths, _, batch = spec.partition("@")
    return [int(w) for w in widths.split("-")], int(batch)


def time_per_call(torch, fn, repeats, window_ms):
    """Median over `repeats` windows of the GPU time per call of fn()."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def window(calls):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3 / calls

    for _ in range(3):
        fn()
    once = window(5)
    calls = int(min(20000, max(3, window_ms / 1e3 / max(once, 1e-7))))
    return statistics.median(window(calls) for _ in range(repeats))


def step_gemms(torch, widths, batch):
    """The GEMMs one step runs, as (a, b) with c = a @ b, like bench_gpu_step:
    per layer x·Wᵀ and dyᵀ·x, and dy·W for every layer but the first."""
    shapes = []
    for layer, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        x = torch.randn(batch, fan_in, device="cuda")
        w = torch.randn(fan_out, fan_in, device="cuda")
        dy = torch.randn(batch, fan_out, device="cuda")
        shapes.append((x, w.t()))
        if layer > 0:
            shapes.append((dy, w))
        shapes.append((dy.t(), x))
    return shapes


def bench_config(torch, widths, batch, lr, repeats, window_ms):
    layers = []
    for k, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if k + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.randn(batch, widths[0], device="cuda")
    y = torch.randint(0, widths[-1], (batch,), device="cuda")

    def eager_step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    eager_s = time_per_call(torch, eager_step, repeats, window_ms)

    # The whole-network capture of PyTorch's CUDA-graph notes: warm up on a side
    # stream, set gradients to None so backward allocates them from the graph's
    # pool, capture forward + backward + step, then replay.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = torch.nn.functional.cross_entropy(model(x), y)
        static_loss.backward()
        optimizer.step()
    graph_s = time_per_call(torch, graph.replay, repeats, window_ms)

    mm_s, flops = 0.0, 0.0
    for a, b in step_gemms(torch, widths, batch):
        out = torch.empty(a.shape[0], b.shape[1], device="cuda")
        mm_s += time_per_call(torch, lambda: torch.mm(a, b, out=out), repeats, window_ms)
        flops += 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    return {"model": "-".join(map(str, widths)), "batch": batch, "step_gemm_flops": flops,
            "eager": {"step_s": eager_s, "tflops": flops / eager_s / 1e12},
            "graph": {"step_s": graph_s, "tflops": flops / graph_s / 1e12},
            "mm_s": mm_s, "mm_tflops": flops / mm_s / 1e12}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="WIDTHS@BATCH, repeatable "
                        "(default: 784-256-10@256 and 784-1024-1024-10@4096)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--window-ms", type=float, default=50.0)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--json", help="also write the JSON to this file")
    args = parser.parse_args()
    configs = [parse_config(c) for c in (args.config or ["784-256-10@256", "784-1024-1024-10@4096"])]

    doc = {"bench": "torch_step"}
    try:
        import torch
    except ImportError as error:
        doc["skipped"] = f"torch not importable: {error}"
    else:
        doc["torch"] = torch.__version__
        if not torch.cuda.is_available():
            doc["skipped"] = f"torch {torch.__version__} sees no CUDA device"
        else:
            # fp32, as dpt's default: PyTorch 2.9+ says it with fp32_precision
            # (allow_tf32 is deprecated there and warns), older ones with allow_tf32
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
                torch.backends.cuda.matmul.fp32_precision = "ieee"
            else:
                torch.backends.cuda.matmul.allow_tf32 = False
            torch.manual_seed(0)
            doc["device"] = torch.cuda.get_device_name(0)
            doc["results"] = [bench_config(torch, w, b, args.lr, args.repeats, args.window_ms)
                              for w, b in configs]
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
