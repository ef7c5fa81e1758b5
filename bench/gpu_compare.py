#!/usr/bin/env python3
"""gpu_compare.py — dpt's MLP step on a GPU against PyTorch's, and issue 10's goals.

Runs bench_gpu_step (dpt: eager, CUDA graph, cuBLAS SGEMM at the step's shapes)
and bench/torch_step.py (PyTorch: eager, CUDA graph) on the same GPU, one after
the other, with the same configurations; prints the times side by side with
their ratios and the goals as verdicts:

  * at batch <= 256 (launch-bound): dpt's step (its faster mode) takes at most
    PyTorch's CUDA-graph replay time;
  * at batch 4096: dpt's step runs at >= 80 % of cuBLAS SGEMM's FLOP rate at
    the step's own GEMM shapes (SGEMM time of those GEMMs / step time).

    python3 bench/gpu_compare.py --bench build/gpu/bin/bench_gpu_step --out build/gpu/check
    python3 bench/gpu_compare.py --dpt-json a.json --torch-json b.json   # compare earlier runs

Writes OUT/bench_gpu_step.{json,log}, OUT/torch_step.{json,log} and
OUT/gpu_compare.json. Exit status: 0 every goal met, 3 a goal missed (or dpt's
own checks failed), 4 nothing to judge (no GPU, no PyTorch: the reason is
printed), 1 a program failed.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["784-256-10@256", "784-1024-1024-10@4096"]
LAUNCH_BOUND_MAX_BATCH = 256   # the "batch <= 256"
GEMM_BOUND_BATCH = 4096        # the "batch 4096"
SGEMM_SHARE_GOAL = 0.80


def run_logged(command, log_path):
    """Runs command, printing and logging its output; returns its exit status."""
    print("$ " + " ".join(command), flush=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        return proc.wait()


def load(path):
    with open(path) as f:
        return json.load(f)


def best_mode(row):
    """dpt's faster mode for a config: ('graph' or 'eager', its entry)."""
    graph = row.get("graph", {})
    if "step_s" in graph and graph["step_s"] < row["eager"]["step_s"]:
        return "graph", graph
    return "eager", row["eager"]


def us(seconds):
    return f"{seconds * 1e6:.1f}"


def compare(dpt, torch):
    """Table rows and verdicts from the two JSON documents.
    Verdicts are (passed: True/False/None for not judged, sentence)."""
    torch_rows = {}
    if "results" in torch:
        torch_rows = {(r["model"], r["batch"]): r for r in torch["results"]}
    rows, verdicts = [], []
    for row in dpt.get("results", []):
        key = (row["model"], row["batch"])
        name = f"{row['model']} B={row['batch']}"
        mode, best = best_mode(row)
        t = torch_rows.get(key)
        graph_s = row.get("graph", {}).get("step_s")
        rows.append({
            "config": name, "dpt_eager_us": row["eager"]["step_s"] * 1e6,
            "dpt_graph_us": graph_s * 1e6 if graph_s else None,
            "torch_eager_us": t["eager"]["step_s"] * 1e6 if t else None,
            "torch_graph_us": t["graph"]["step_s"] * 1e6 if t else None,
            "dpt_best": mode, "dpt_over_sgemm": row["sgemm_s"] / best["step_s"],
            "torch_graph_over_dpt": t["graph"]["step_s"] / best["step_s"] if t else None,
            "sgemm_tflops": row["sgemm_tflops"], "torch_mm_tflops": t["mm_tflops"] if t else None})
        if row["batch"] <= LAUNCH_BOUND_MAX_BATCH:
            if t is None:
                reason = torch.get("skipped", "no PyTorch result for this configuration")
                verdicts.append((None, f"{name}: dpt step <= PyTorch CUDA graph: not judged ({reason})"))
            else:
                ok = best["step_s"] <= t["graph"]["step_s"]
                verdicts.append((ok, f"{name}: dpt step {us(best['step_s'])} us ({mode}) <= PyTorch CUDA graph "
                                     f"{us(t['graph']['step_s'])} us (PyTorch eager {us(t['eager']['step_s'])} us)"))
        if row["batch"] == GEMM_BOUND_BATCH:
            share = row["sgemm_s"] / best["step_s"]
            verdicts.append((share >= SGEMM_SHARE_GOAL,
                             f"{name}: dpt step at {100 * share:.0f} % of cuBLAS SGEMM's rate at its shapes "
                             f"({mode}, {best['tflops']:.1f} vs {row['sgemm_tflops']:.1f} TFLOP/s) >= "
                             f"{100 * SGEMM_SHARE_GOAL:.0f} %"))
    if dpt.get("verdicts_passed") is False:
        verdicts.append((False, "dpt's own checks (graph replay = eager step, memory untouched): see bench_gpu_step.log"))
    return rows, verdicts


def cell(value, fmt):
    return "-" if value is None else fmt.format(value)


def print_table(rows):
    headers = ["config", "dpt eager us", "dpt graph us", "torch eager us", "torch graph us",
               "torch graph/dpt", "dpt/SGEMM", "SGEMM TFLOP/s", "torch mm TFLOP/s"]
    lines = [[r["config"], cell(r["dpt_eager_us"], "{:.1f}"), cell(r["dpt_graph_us"], "{:.1f}"),
              cell(r["torch_eager_us"], "{:.1f}"), cell(r["torch_graph_us"], "{:.1f}"),
              cell(r["torch_graph_over_dpt"], "{:.2f}x"), cell(100 * r["dpt_over_sgemm"], "{:.0f}%"),
              cell(r["sgemm_tflops"], "{:.1f}"), cell(r["torch_mm_tflops"], "{:.1f}")] for r in rows]
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(headers)]
    print("dpt vs PyTorch, MLP training step on one GPU (fp32, SGD)")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("-" * (sum(widths) + 2 * (len(widths) - 1)))
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    print("torch graph/dpt > 1: dpt's faster mode beats PyTorch's CUDA graph. dpt/SGEMM: the step's GEMMs alone\n"
          "on cuBLAS over the whole step's time (dpt's faster mode).")


def judge(dpt, torch, out_dir):
    """Prints the comparison; returns the exit status."""
    if "skipped" in dpt:
        print(f"gpu_compare: nothing to judge: bench_gpu_step skipped: {dpt['skipped']}")
        return 4
    if "skipped" in torch:
        print(f"gpu_compare: PyTorch skipped: {torch['skipped']}")
    rows, verdicts = compare(dpt, torch)
    print_table(rows)
    print("\ngoals (issue 10)")
    marks = {True: "✔", False: "✘", None: "?"}
    for ok, sentence in verdicts:
        print(f"  {marks[ok]} {sentence}")
    outcomes = [ok for ok, _ in verdicts]
    failed, unjudged = outcomes.count(False), outcomes.count(None)
    print(f"{outcomes.count(True)} of {len(verdicts)} goals met"
          + (f", {unjudged} not judged" if unjudged else ""))
    if out_dir:
        with open(os.path.join(out_dir, "gpu_compare.json"), "w") as f:
            json.dump({"device": dpt.get("device"), "torch": torch.get("torch"), "rows": rows,
                       "goals": [{"passed": ok, "what": s} for ok, s in verdicts]}, f, indent=2)
    if failed:
        return 3
    return 4 if unjudged or not verdicts else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", help="the bench_gpu_step program to run")
    parser.add_argument("--python", default=sys.executable, help="Python with torch for torch_step.py")
    parser.add_argument("--out", default=".", help="folder for the JSON files and logs")
    parser.add_argument("--config", action="append", help=f"WIDTHS@BATCH, repeatable (default {' '.join(CONFIGS)})")
    parser.add_argument("--dpt-json", help="compare this earlier bench_gpu_step JSON instead of running it")
    parser.add_argument("--torch-json", help="compare this earlier torch_step.py JSON instead of running it")
    args = parser.parse_args()
    if not args.bench and not args.dpt_json:
        parser.error("give --bench PROGRAM (to run it) or --dpt-json FILE (an earlier run)")
    os.makedirs(args.out, exist_ok=True)
    configs = [a for c in (args.config or CONFIGS) for a in ("--config", c)]

    dpt_json = args.dpt_json or os.path.join(args.out, "bench_gpu_step.json")
    if not args.dpt_json:
        rc = run_logged([args.bench, *configs, "--json", dpt_json], os.path.join(args.out, "bench_gpu_step.log"))
        if rc not in (0, 3) or not os.path.exists(dpt_json):  # 3: ran, but its own checks failed
            print(f"gpu_compare: {args.bench} failed with status {rc}")
            return 1
    torch_json = args.torch_json or os.path.join(args.out, "torch_step.json")
    if not args.torch_json:
        dpt = load(dpt_json)
        if "skipped" in dpt:  # no GPU: PyTorch would only say the same
            return judge(dpt, {}, args.out)
        rc = run_logged([args.python, os.path.join(HERE, "torch_step.py"), *configs, "--json", torch_json],
                        os.path.join(args.out, "torch_step.log"))
        if rc != 0 or not os.path.exists(torch_json):
            with open(torch_json, "w") as f:
                json.dump({"skipped": f"torch_step.py failed with status {rc} (see torch_step.log)"}, f)
    return judge(load(dpt_json), load(torch_json), args.out)


if __name__ == "__main__":
    sys.exit(main())
