#!/usr/bin/python3
"""torch_gpt_step.py — PyTorch's side of bench_gpt_step: the same GPT training
step (forward, cross-entropy, backward, AdamW, zero_grad), timed the same way,
printed as one JSON object.

The model is tests/pytorch/nanogpt.py (nanoGPT's model.py without dropout,
untied head, tanh GELU), float32, one thread (torch.set_num_threads(1)), as
dpt's step runs on one thread. AdamW with PyTorch's defaults but the learning
rate (1e-4, so thousands of steps barely move the weights) and decay 0.01.
bench_gpt_step runs this script itself; by hand:

    /usr/bin/python3 bench/torch_gpt_step.py --layers 4 --heads 4 --width 128 --context 64 --batch 12 --vocab 65

Timing: torch_mlp_step.median_seconds (warm up, then `repeats` windows; the
median window's time per call). Exit status 77 when torch is not importable.

OpenBLAS picks its kernels from the CPU's model number, and 0.3.21 (Debian 12)
does not know every recent one: on an "Intel(R) Xeon(R) Processor" VM (a
Sapphire Rapids with AVX-512) it runs its Prescott (SSE3) kernels, 31 GFLOP/s
against 142 with its SkylakeX ones at the step's shapes, and PyTorch's step
takes 4x longer than it should. dpt's Eigen is built for the machine
(-march=native), so unless OPENBLAS_CORETYPE is set, it is set here from the
CPU's flags (avx512f: SkylakeX, avx2: Haswell) before torch loads the BLAS,
and the JSON names the kernels OpenBLAS ran.
"""
import argparse
import ctypes
import json
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            return set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    except OSError:
        return set()


if "OPENBLAS_CORETYPE" not in os.environ:
    _flags = cpu_flags()
    _core = "SkylakeX" if {"avx512f", "avx512bw", "avx512vl"} <= _flags else "Haswell" if "avx2" in _flags else None
    if _core:
        os.environ["OPENBLAS_CORETYPE"] = _core

try:
    import torch
except ImportError as error:
    print(json.dumps({"error": f"torch not importable: {error}"}))
    sys.exit(77)

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
sys.path.insert(0, os.path.join(_here, "..", "tests", "pytorch"))
from nanogpt import GPT  # noqa: E402
from torch_mlp_step import blas_library, median_seconds  # noqa: E402


def openblas_core(blas):
    """The kernels OpenBLAS runs ("SkylakeX"), or "" when the BLAS is not OpenBLAS."""
    if not blas.startswith("openblas ("):
        return ""
    try:
        corename = ctypes.CDLL(blas[len("openblas ("):-1]).openblas_get_corename
        corename.restype = ctypes.c_char_p
        return corename().decode()
    except (OSError, AttributeError):
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("layers", 4), ("heads", 4), ("width", 128), ("context", 64), ("batch", 12), ("vocab", 65)):
        parser.add_argument(f"--{flag}", type=int, default=default)
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    model = GPT(args.vocab, args.context, args.layers, args.heads, args.width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    x = torch.randint(0, args.vocab, (args.batch, args.context))
    y = torch.randint(0, args.vocab, (args.batch, args.context))

    def step():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, args.vocab), y.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step_s = median_seconds(step, args.seconds, args.repeats)
    blas = blas_library()
    core = openblas_core(blas)
    if core:
        blas += f", {core} kernels" + (" (OPENBLAS_CORETYPE)" if "OPENBLAS_CORETYPE" in os.environ else "")
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "blas": blas,
                      "parameters": sum(p.numel() for p in model.parameters()), "step_s": step_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
