#!/usr/bin/python3
"""crosscheck_transformer_ops.py — chapter 14's ops against torch.nn.functional.

What it checks: each op dpt's GPT is built from — batched products (bmm, all
four transpose pairs), embedding, layer norm (eps 1e-5), GELU's tanh form,
softmax with and without a causal mask, the head swap and a column block —
gives PyTorch's output, and PyTorch's gradient for every input, from the same
inputs in float32. PyTorch shares no code with dpt.

How: `dpt_transformer_ops_dump OUT` (tests/pytorch/transformer_ops_dump.cpp)
runs the ops on dpt's CPU kernels and writes, per case, the inputs, the loss
weights r, the output and the gradients of Σ r ⊙ out; this script recomputes
them with torch (one thread) and compares tensor by tensor. A few deliberately
wrong PyTorch variants (controls) must be told apart, so the check cannot pass
vacuously.

Usage:
    /usr/bin/python3 tests/pytorch/crosscheck_transformer_ops.py --bin-dir build/reference/bin

Exit status: 0 all match, 1 a mismatch (or the program failed), 77 torch or
numpy is not importable (CTest: skipped).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:  # CTest: SKIP_RETURN_CODE 77
    print(f"skipped: torch not importable ({error}); this check needs torch and numpy, "
          "e.g. Debian's /usr/bin/python3 (set -DDPT_PYTHON=…)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crosscheck import read_safetensors  # noqa: E402  (the same hand-written reader)

# ----------------------------------------------------------------------------
# tolerance, argued
#
# Error measure: per tensor, max |dpt − torch| / max |torch| (an entry near 0
# in a tensor of O(1) entries is judged against the tensor's scale, as a
# float32 result can only be).
#
# Both sides compute in float32 (u = 6e-8) and differ only in the order of
# their sums and in exp/tanh implementations (≤ 5 ulp each; dpt's CPU takes
# Eigen's vectorised tanh): bmm sums K = 8 or 17 products, layer norm and
# softmax rows of 48 and 17 entries; layer norm's
# dx subtracts two row means from g, which costs a few ulps of max|g|. Each
# entry is then off by a few u times its row's magnitude: ~1e-7…1e-6 relative
# to the tensor's max (measured: ≤ 8e-7 on every tensor, the largest GELU's dx,
# where 1 − tanh² near saturation magnifies tanh's few ulps). TOLERANCE = 1e-5
# is ~10× above that, and far below any real mistake, which moves entries by
# O(1) relative: a mask on the wrong diagonal, a missing mean term, an
# overwritten embedding row, a transpose. The controls below show it resolves
# much smaller slips: GELU's erf form instead of the tanh form (its gradient
# moves by ~7e-4 relative), layer norm's ε 1e-3 instead of 1e-5 (~2e-4).
TOLERANCE = 1e-5
CONTROL_MARGIN = 10.0  # a control must miss by ≥ 10 × TOLERANCE


def read_metadata(path):
    """The file's "__metadata__" strings."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(header_len)).get("__metadata__", {})


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def leaf(array):
    return torch.from_numpy(array.copy()).requires_grad_(True)


def torch_case(t, name, inputs, op):
    """PyTorch's out and gradients of Σ r ⊙ out for case `name`: {out, d<input>…}."""
    leaves = {k: leaf(t[f"{name}.{k}"]) for k in inputs}
    out = op(**leaves)
    (out * torch.from_numpy(t[f"{name}.r"])).sum().backward()
    result = {"out": out.detach().numpy()}
    for k, v in leaves.items():
        result[f"d{k}"] = v.grad.numpy()
    return result


def causal_softmax(x):
    """softmax over the last axis with −inf above the diagonal (query i sees keys j ≤ i)."""
    t = x.shape[-1]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
    return F.softmax(x.masked_fill(mask, float("-inf")), dim=-1)


def embedding_overwriting(table, tokens):
    """A wrong embedding backward (control): the last occurrence of a token overwrites the others."""
    class Overwrite(torch.autograd.Function):
        @staticmethod
        def forward(ctx, table):
            return F.embedding(tokens, table)

        @staticmethod
        def backward(ctx, dout):
            return torch.zeros_like(table).index_copy(0, tokens, dout)
    return Overwrite.apply(table)


def cases(t, meta):
    """(name, inputs, the torch op) for every case the dump program wrote."""
    tokens = torch.from_numpy(t["embedding.tokens"])
    begin, count = int(meta["columns.begin"]), int(meta["columns.count"])
    eps = float(meta["layer_norm.eps"])
    listed = []
    for ta in (False, True):
        for tb in (False, True):
            name = f"bmm_{'t' if ta else 'n'}{'t' if tb else 'n'}"
            alpha = float(np.float32(meta[f"{name}.alpha"]))

            def bmm(a, b, ta=ta, tb=tb, alpha=alpha):
                return alpha * torch.bmm(a.transpose(1, 2) if ta else a, b.transpose(1, 2) if tb else b)
            listed.append((name, ["a", "b"], bmm))
    listed += [
        ("embedding", ["table"], lambda table: F.embedding(tokens, table)),
        ("layer_norm", ["x", "weight", "bias"],
         lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias, eps=eps)),
        ("gelu", ["x"], lambda x: F.gelu(x, approximate="tanh")),
        ("softmax", ["x"], lambda x: F.softmax(x, dim=-1)),
        ("softmax_causal", ["x"], causal_softmax),
        ("swap_axes_12", ["x"], lambda x: x.transpose(1, 2).contiguous()),
        ("columns", ["x"], lambda x: x[:, begin:begin + count]),
    ]
    return listed


def controls(t):
    """(what, case, inputs, a wrong torch op, the tensor it must get wrong)."""
    tokens = torch.from_numpy(t["embedding.tokens"])
    return [
        ("softmax without the causal mask", "softmax_causal", ["x"], lambda x: F.softmax(x, dim=-1), "out"),
        ("GELU's erf form", "gelu", ["x"], lambda x: F.gelu(x), "dx"),
        ("layer norm with eps 1e-3", "layer_norm", ["x", "weight", "bias"],
         lambda x, weight, bias: F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-3), "out"),
        ("an embedding backward that overwrites repeated tokens", "embedding", ["table"],
         lambda table: embedding_overwriting(table, tokens), "dtable"),
    ]


def main():
    parser = argparse.ArgumentParser(description="Cross-check chapter 14's ops against torch.nn.functional.")
    parser.add_argument("--bin-dir", required=True, help="folder with dpt_transformer_ops_dump")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    exe = os.path.join(os.path.abspath(args.bin_dir), "dpt_transformer_ops_dump")
    if not os.path.exists(exe):
        print(f"crosscheck: {exe} not found: build it first (cmake --build … --target dpt_transformer_ops_dump)")
        return 1
    with tempfile.TemporaryDirectory(prefix="dpt_ops_crosscheck_") as workdir:
        path = os.path.join(workdir, "ops.safetensors")
        proc = subprocess.run([exe, path], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"crosscheck: {exe} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
            return 1
        t = read_safetensors(path)
        meta = read_metadata(path)

    print(f"dpt vs PyTorch {torch.__version__} (float32, 1 thread, same inputs); "
          f"tolerance {TOLERANCE:.0e} on max|dpt − torch| / max|torch| per tensor")
    problems = []
    for name, inputs, op in cases(t, meta):
        want = torch_case(t, name, inputs, op)
        for key, value in want.items():
            err = relative_error(t[f"{name}.{key}"], value)
            verdict = "ok" if err <= TOLERANCE else "MISMATCH"
            print(f"  {name + '.' + key:24} {err:.1e}  {verdict}")
            if err > TOLERANCE:
                problems.append(f"{name}.{key} differs by {err:.2e} (tolerance {TOLERANCE:.0e})")
    print(f"controls (each must differ by ≥ {CONTROL_MARGIN * TOLERANCE:.0e}):")
    for what, name, inputs, op, key in controls(t):
        err = relative_error(t[f"{name}.{key}"], torch_case(t, name, inputs, op)[key])
        print(f"  {what:54} {err:.1e}")
        if err < CONTROL_MARGIN * TOLERANCE:
            problems.append(f"the control '{what}' differs by only {err:.2e}: the check could not see it")
    for p in problems:
        print(f"  problem: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
