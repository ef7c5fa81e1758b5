#!/usr/bin/python3
"""gpt_run_vs_torch.py — chapter 14's training run beside PyTorch's: the same GPT,
initial weights, windows and optimizer for N steps, then the held-out loss of
each, in nats and bits per character, and the wall time of each.

What it runs, in a temporary directory:
  1. `ch14_language_model --ranks 1 --data kjv --steps 0 --save-weights init
     --save-data train` writes the initial weights and the training tokens;
  2. `… --no-shuffle --load-weights init --steps N --eval-every N
     --eval-batches E --metrics m.jsonl` trains and measures the held-out loss
     once, after step N (its metrics' last line);
  3. PyTorch trains tests/pytorch/nanogpt.py's model from `init` (float32, one
     thread, OpenBLAS's kernels set as bench/torch_gpt_step.py sets them) on
     the same windows — step s, window g starts at ((s·G + g)·T) mod (N − T − 1),
     the --no-shuffle rule — with AdamW (PyTorch's defaults, weight decay 0.01,
     the chapter's learning rate), then measures its held-out loss on the
     windows the chapter measures (evaluation_starts, below).

The held-out tokens: the chapter saves only the training split, so this reads
the text it read (kjv.txt in dpt's data cache: $DPT_DATA_CACHE, else
$XDG_CACHE_HOME/dpt, else ~/.cache/dpt), encodes it with the vocabulary saved
in `init`, checks that its first ⌊9M/10⌋ tokens are the saved training split,
and holds out the rest, as nanoGPT and the chapter split.

The two losses are not expected to be equal to the last digit: the
cross-check (tests/pytorch/crosscheck_ch14.py) pins 20 steps to 1e-4; over
hundreds of steps the two float32 sums drift apart as any two BLAS do, and the
difference printed says by how much. No time is asserted.

    /usr/bin/python3 bench/gpt_run_vs_torch.py                        # N = 300, E = 50
    /usr/bin/python3 bench/gpt_run_vs_torch.py --steps 1000 --bin-dir build/dev/bin

Exit status: 0 both ran, 1 a run failed or the texts disagree, 77 torch is
not importable or the kjv text is not installed.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
sys.path.insert(0, os.path.join(_here, "..", "tests", "pytorch"))
# torch_gpt_step sets one thread and OPENBLAS_CORETYPE before torch loads; it exits 77 without torch.
import torch_gpt_step as tgs  # noqa: E402
import crosscheck as cc  # noqa: E402
from nanogpt import GPT  # noqa: E402

torch, np, F = tgs.torch, cc.np, tgs.torch.nn.functional
CHAPTER = "ch14_language_model"
# The chapter's defaults (ch14_flags.h), passed to it explicitly so both sides use these numbers.
SHAPE = {"layers": 4, "heads": 4, "width": 128, "context": 64, "batch": 12}
LR, WEIGHT_DECAY, SEED = 1e-3, 0.01, 42


def evaluation_starts(tokens, context, count):
    """The chapter's held-out windows (text_windows.h, evaluation_starts): K = ⌊(M − 1)/T⌋
    non-overlapping tiles at k·T; `count` of them spread as tile ⌊k·K/count⌋, or all K."""
    tiles = (tokens - 1) // context
    if count == 0 or count > tiles:
        count = tiles
    return [(k * tiles // count) * context for k in range(count)]


def batch(tokens, starts, context):
    x = np.stack([tokens[s:s + context] for s in starts])
    y = np.stack([tokens[s + 1:s + context + 1] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)


def data_cache():
    """dpt's data cache folder, by the rule of default_data_cache() (text_corpus.h)."""
    for name in ("DPT_DATA_CACHE", "XDG_CACHE_HOME", "HOME"):
        value = os.environ.get(name)
        if value:
            return value if name == "DPT_DATA_CACHE" else os.path.join(value, ".cache/dpt" if name == "HOME" else "dpt")
    raise RuntimeError("no data cache folder: set DPT_DATA_CACHE (or HOME)")


def vocabulary(path):
    """The characters saved in a safetensors file's metadata, token i = character i."""
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return header["__metadata__"]["vocabulary"]


def held_out_tokens(init_path, train):
    """The held-out split of the kjv text, checked against the chapter's training split."""
    with open(os.path.join(data_cache(), "kjv.txt"), encoding="utf-8") as f:
        text = f.read()
    index = {c: i for i, c in enumerate(vocabulary(init_path))}
    tokens = np.array([index[c] for c in text], dtype=np.int64)
    cut = len(tokens) * 9 // 10
    if cut != len(train) or not np.array_equal(tokens[:cut], train):
        raise RuntimeError("kjv.txt encoded here is not the chapter's training split: the texts differ")
    return tokens[cut:]


def run_chapter(exe, args, cwd):
    command = [exe, "--ranks", "1", "--data", "kjv", "--quiet", "--sample", "0", f"--seed={SEED}",
               f"--lr={LR!r}", f"--weight-decay={WEIGHT_DECAY!r}"] + [f"--{k}={v}" for k, v in SHAPE.items()] + args
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode == 3:  # a verdict ✘ (e.g. too few steps to pass H₁): the losses still stand
        failed = next((line.strip() for line in proc.stdout.splitlines() if "FAILED" in line), "a verdict failed")
        print(f"note: {CHAPTER} exited 3: {failed}")
    elif proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout, wall


def train_torch(init, train, held, steps, eval_batches):
    """N AdamW steps on the --no-shuffle windows, then the held-out loss; (loss, seconds)."""
    weights = {name: torch.from_numpy(w) for name, w in init.items()}
    vocab, width = init["transformer.wte.weight"].shape
    model = GPT(vocab, SHAPE["context"], SHAPE["layers"], SHAPE["heads"], width)
    model.load_state_dict(weights, strict=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    T, G = SHAPE["context"], SHAPE["batch"]  # one rank: the global batch is B
    start = time.perf_counter()
    for s in range(steps):
        x, y = batch(train, [((s * G + g) * T) % (len(train) - T - 1) for g in range(G)], T)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x).view(-1, vocab), y.reshape(-1))
        loss.backward()
        optimizer.step()
    starts = evaluation_starts(len(held), T, eval_batches * G)
    total = 0.0
    with torch.no_grad():  # batches of B, as the chapter; every window has T targets
        for at in range(0, len(starts), G):
            x, y = batch(held, starts[at:at + G], T)
            total += F.cross_entropy(model(x).view(-1, vocab), y.reshape(-1)).item() * len(x)
    return total / len(starts), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=os.path.join(_here, "..", "build", "reference", "bin"),
                        help=f"folder with {CHAPTER} (default: build/reference/bin)")
    parser.add_argument("--steps", type=int, default=300, help="N, optimizer steps (default 300)")
    parser.add_argument("--eval-batches", type=int, default=50,
                        help="E, held-out batches of B windows (default 50: 600 windows, 38,400 characters)")
    parser.add_argument("--json", help="also write the result as one JSON object to this file")
    args = parser.parse_args()
    if args.steps < 1 or args.eval_batches < 1:
        print("gpt_run_vs_torch: --steps and --eval-batches take integers >= 1", file=sys.stderr)
        return 2
    exe = os.path.join(os.path.abspath(args.bin_dir), CHAPTER)
    if not os.path.exists(exe):
        print(f"gpt_run_vs_torch: {exe} not found: build {CHAPTER} first", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    N, E = args.steps, args.eval_batches
    with tempfile.TemporaryDirectory(prefix="dpt_gpt_run_") as work:
        try:
            run_chapter(exe, ["--steps", "0", "--save-weights", "init.safetensors", "--save-data", "train.safetensors"],
                        work)
        except RuntimeError as error:
            if "bible-kjv" in str(error):
                print(f"skipped: --data kjv needs Debian's bible-kjv ({str(error).strip().splitlines()[-1]})")
                return 77
            raise
        out, dpt_wall = run_chapter(exe, ["--no-shuffle", "--load-weights", "init.safetensors", "--steps", str(N),
                                          "--eval-every", str(N), "--eval-batches", str(E), "--metrics", "m.jsonl"],
                                    work)
        with open(os.path.join(work, "m.jsonl")) as f:
            dpt_loss = json.loads(f.read().splitlines()[-1])["held_out_loss"]
        steps_per_s = float(next(line.split()[-1] for line in out.splitlines() if "steps per second" in line))
        init = cc.read_safetensors(os.path.join(work, "init.safetensors"))
        train = cc.read_safetensors(os.path.join(work, "train.safetensors"))["tokens"]
        held = held_out_tokens(os.path.join(work, "init.safetensors"), train)
    torch_loss, torch_s = train_torch(init, train, held, N, E)

    blas = tgs.blas_library()
    core = tgs.openblas_core(blas)
    windows = len(evaluation_starts(len(held), SHAPE["context"], E * SHAPE["batch"]))
    result = {"steps": N, "eval_windows": windows, "shape": SHAPE, "lr": LR, "weight_decay": WEIGHT_DECAY,
              "dpt_loss": dpt_loss, "torch_loss": torch_loss, "dpt_s": N / steps_per_s, "dpt_process_s": dpt_wall,
              "torch_s": torch_s, "torch": torch.__version__, "blas": blas + (f", {core} kernels" if core else "")}
    bits = 1 / math.log(2)
    print(f"ch14 vs PyTorch {torch.__version__} ({result['blas']}; float32, 1 thread each): "
          f"{N} AdamW steps (lr {LR:g}, decay {WEIGHT_DECAY:g}) of {SHAPE['batch']} kjv windows of "
          f"{SHAPE['context']}, from the same weights, --no-shuffle windows; held out: {windows} windows "
          f"({windows * SHAPE['context']:,} characters)")
    print(f"  {'':8}{'held-out nats':>14}{'bits/char':>11}{'train+eval s':>14}")
    print(f"  {'dpt':8}{dpt_loss:14.4f}{dpt_loss * bits:11.3f}{result['dpt_s']:14.1f}"
          f"   (the process: {dpt_wall:.1f} s)")
    print(f"  {'PyTorch':8}{torch_loss:14.4f}{torch_loss * bits:11.3f}{torch_s:14.1f}")
    print(f"  {'dpt − PT':8}{dpt_loss - torch_loss:+14.1e}{(dpt_loss - torch_loss) * bits:+11.1e}"
          f"{result['dpt_s'] / torch_s:13.2f}×")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as error:
        print(f"gpt_run_vs_torch: {error}", file=sys.stderr)
        sys.exit(1)
