#!/usr/bin/env python3
"""test_gpu_compare.py — gpu_compare.py's goal verdicts on hand-made results
(the numbers and the expected verdicts are written here, not computed by the
code under test), and, on a machine without a GPU, the no-GPU answers of the
real programs: given bench_gpu_step, the whole driver must say so and exit 4,
never claim a goal; scripts/gpu-check must say "no GPU", build nothing and
exit 1.

    python3 bench/test_gpu_compare.py [build/reference/bin/bench_gpu_step]
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_compare  # noqa: E402

BENCH = None  # bench_gpu_step, from the command line


def dpt_row(model, batch, sgemm_us, eager_us, graph_us=None):
    flops = 1e9
    row = {"model": model, "batch": batch, "sgemm_s": sgemm_us * 1e-6, "sgemm_tflops": flops / (sgemm_us * 1e-6) / 1e12,
           "eager": {"step_s": eager_us * 1e-6, "tflops": flops / (eager_us * 1e-6) / 1e12}}
    row["graph"] = ({"step_s": graph_us * 1e-6, "tflops": flops / (graph_us * 1e-6) / 1e12}
                    if graph_us else {"skipped": "not captured"})
    return row


def torch_row(model, batch, eager_us, graph_us):
    return {"model": model, "batch": batch, "eager": {"step_s": eager_us * 1e-6}, "graph": {"step_s": graph_us * 1e-6},
            "mm_tflops": 40.0}


def judge_quietly(dpt, torch):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = gpu_compare.judge(dpt, torch, None)
    return status, out.getvalue()


class Goals(unittest.TestCase):
    def test_small_batch_goal_compares_dpt_best_mode_with_torch_graph(self):
        # dpt: eager 300 us, graph 95 us; PyTorch graph 105 us -> met, via the graph.
        rows, verdicts = gpu_compare.compare({"results": [dpt_row("784-256-10", 256, 50, 300, 95)]},
                                             {"results": [torch_row("784-256-10", 256, 878, 105)]})
        self.assertEqual([ok for ok, _ in verdicts], [True])
        self.assertIn("(graph)", verdicts[0][1])
        self.assertAlmostEqual(rows[0]["torch_graph_over_dpt"], 105 / 95)
        # graph not captured: eager 120 us against 105 us -> missed.
        _, verdicts = gpu_compare.compare({"results": [dpt_row("784-256-10", 256, 50, 120)]},
                                          {"results": [torch_row("784-256-10", 256, 878, 105)]})
        self.assertEqual([ok for ok, _ in verdicts], [False])
        self.assertIn("(eager)", verdicts[0][1])

    def test_large_batch_goal_is_sgemm_time_over_step_time(self):
        # 850 us of SGEMM in a 1000 us step: 85 % >= 80 %; in a 1100 us step: 77 % < 80 %.
        torch = {"results": [torch_row("784-1024-1024-10", 4096, 1173, 1063)]}
        _, met = gpu_compare.compare({"results": [dpt_row("784-1024-1024-10", 4096, 850, 1000)]}, torch)
        _, missed = gpu_compare.compare({"results": [dpt_row("784-1024-1024-10", 4096, 850, 1100)]}, torch)
        self.assertEqual([ok for ok, _ in met], [True])
        self.assertIn("85 %", met[0][1])
        self.assertEqual([ok for ok, _ in missed], [False])
        self.assertIn("77 %", missed[0][1])

    def test_exit_status(self):
        dpt = {"results": [dpt_row("784-256-10", 256, 50, 300, 95), dpt_row("784-1024-1024-10", 4096, 850, 1000)]}
        torch = {"results": [torch_row("784-256-10", 256, 878, 105), torch_row("784-1024-1024-10", 4096, 1173, 1063)]}
        self.assertEqual(judge_quietly(dpt, torch)[0], 0)
        status, text = judge_quietly(dpt, {"skipped": "torch sees no CUDA device"})
        self.assertEqual(status, 4)  # the launch-bound goal cannot be judged without PyTorch
        self.assertIn("not judged (torch sees no CUDA device)", text)
        self.assertEqual(judge_quietly(dict(dpt, verdicts_passed=False), torch)[0], 3)
        slow = {"results": [dpt_row("784-256-10", 256, 50, 300, 200)]}
        self.assertEqual(judge_quietly(slow, torch)[0], 3)
        status, text = judge_quietly({"skipped": "no CUDA device: no driver"}, {})
        self.assertEqual(status, 4)
        self.assertIn("no CUDA device: no driver", text)


class Driver(unittest.TestCase):
    def test_without_a_gpu_the_driver_says_so_and_claims_nothing(self):
        if not BENCH:
            self.skipTest("give the bench_gpu_step program on the command line")
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([BENCH, "--config", "8-4@2", "--json", os.path.join(out, "probe.json")],
                           capture_output=True, check=True)
            probe = gpu_compare.load(os.path.join(out, "probe.json"))
        if "skipped" not in probe:
            self.skipTest("this machine has a GPU: the no-GPU path cannot be seen here")
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "gpu_compare.py"),
                                   "--bench", BENCH, "--out", out], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
            self.assertIn("nothing to judge: bench_gpu_step skipped", proc.stdout)
            self.assertNotIn("✔", proc.stdout)
            self.assertIn("skipped", gpu_compare.load(os.path.join(out, "bench_gpu_step.json")))

    def test_gpu_check_without_a_gpu_says_no_gpu_and_builds_nothing(self):
        if shutil.which("nvidia-smi") or os.path.exists("/dev/nvidia0"):
            self.skipTest("this machine may have a GPU: gpu-check would build and run everything")
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "gpu-check")
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([script, os.path.join(out, "check")], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("gpu-check: no GPU here:", proc.stdout)
            self.assertIn("Nothing was built or run", proc.stdout)
            # The folder holds the one summary line (a device run's $OUT shows why), and nothing else.
            self.assertEqual(os.listdir(os.path.join(out, "check")), ["summary.txt"])
            with open(os.path.join(out, "check", "summary.txt")) as f:
                self.assertIn("gpu-check: no GPU here:", f.read())


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BENCH = sys.argv.pop(1)
    unittest.main(verbosity=2)
