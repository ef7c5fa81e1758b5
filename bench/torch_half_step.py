#!/usr/bin/env python3
"""torch_half_step.py — PyTorch's side of bench_gpu_half: the MLP training step
under bf16 (or fp16) autocast, replayed as a CUDA graph, and the fp32 eager step,
timed the same way, as JSON.

The step: forward and cross-entropy under torch.autocast (the Linear layers'
GEMMs in 16 bits with fp32 accumulation, the weights fp32 and cast each step),
backward, SGD step on the fp32 weights. No loss scaling (bf16 needs none; the
timed fp16 step skips it too, as dpt's does). Initial weights and data differ
from dpt's: only the time is compared.

Timing: torch.cuda.Event pairs around a window of calls (about --window-ms)
after a warm-up; the median of --repeats windows.

    python3 bench/torch_half_step.py                        # the issue's two shapes
    python3 bench/torch_half_step.py --config 784-1024-1024-10@4096 --json out.json

Without torch or a CUDA device it writes {"skipped": reason} and exits 0.
"""
import argparse
import json
import sys

from torch_step import parse_config, time_per_call  # the same configs and timing as bench_gpu_step's side


def bench_config(torch, widths, batch, dtype, lr, repeats, window_ms):
    layers = []
    for k, (fan_in, fan_out) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out))
        if k + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.randn(batch, widths[0], device="cuda")
    y = torch.randint(0, widths[-1], (batch,), device="cuda")

    def step(half):
        with torch.autocast("cuda", dtype=dtype, enabled=half):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    fp32_eager_s = time_per_call(torch, lambda: step(False), repeats, window_ms)
    half_eager_s = time_per_call(torch, lambda: step(True), repeats, window_ms)

    # PyTorch's whole-network capture (its CUDA-graph notes): warm up on a side
    # stream, gradients None so backward allocates them from the graph's pool.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        with torch.autocast("cuda", dtype=dtype, cache_enabled=False):
            static_loss = torch.nn.functional.cross_entropy(model(x), y)
        static_loss.backward()
        optimizer.step()
    half_graph_s = time_per_call(torch, graph.replay, repeats, window_ms)
    flops = 6.0 * batch * sum(a * b for a, b in zip(widths, widths[1:]))  # 3x forward, as the issue counts
    return {"model": "-".join(map(str, widths)), "batch": batch, "flops": flops,
            "fp32_eager_s": fp32_eager_s, "half_eager_s": half_eager_s, "half_graph_s": half_graph_s,
            "half_graph_tflops": flops / half_graph_s / 1e12}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="WIDTHS@BATCH, repeatable "
                        "(default: 784-1024-1024-10@4096 and 784-4096-4096-10@8192)")
    parser.add_argument("--format", choices=["bf16", "fp16"], default="bf16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window-ms", type=float, default=30.0)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--json", help="also write the JSON to this file")
    args = parser.parse_args()
    configs = [parse_config(c) for c in (args.config or ["784-1024-1024-10@4096", "784-4096-4096-10@8192"])]

    doc = {"bench": "torch_half_step", "format": args.format}
    try:
        import torch
    except ImportError as error:
        doc["skipped"] = f"torch not importable: {error}"
    else:
        doc["torch"] = torch.__version__
        if not torch.cuda.is_available():
            doc["skipped"] = f"torch {torch.__version__} sees no CUDA device"
        else:
            # the fp32 step in true fp32, as dpt's (TF32 off)
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
                torch.backends.cuda.matmul.fp32_precision = "ieee"
            else:
                torch.backends.cuda.matmul.allow_tf32 = False
            torch.manual_seed(0)
            dtype = torch.bfloat16 if args.format == "bf16" else torch.float16
            doc["device"] = torch.cuda.get_device_name(0)
            doc["results"] = [bench_config(torch, w, b, dtype, args.lr, args.repeats, args.window_ms)
                              for w, b in configs]
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as out:
            out.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
