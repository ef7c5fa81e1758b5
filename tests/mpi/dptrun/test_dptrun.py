#!/usr/bin/env python3
"""scripts/dptrun against real mpirun jobs of chapter 07 (docs/ch16_restarts.md).

    test_dptrun.py SCENARIO MPIRUN CH07_ZERO

resumes_on_fewer_ranks  -np 4, rank 2 killed at step 5 (--fail 2@5): dptrun
    finishes the run on 3 ranks from the checkpoint of step 4, and its final
    weights equal, byte for byte, a plain `mpirun -np 3 ... --resume
    DIR/step-00000004` (the issue's "done when"); the run's last checkpoint is
    step 10, written by 3 ranks.
rolls_back_past_a_loss_spike  --max-loss just under the first loss that rises
    above every earlier one: dptrun rolls back to the last checkpoint on the
    same 4 ranks, skipping that batch (and any later one that spikes), and
    its final weights equal, byte for byte, one straight run from step 0
    with the same --skip-batch values (exit 77, skipped, if the run has no
    such step on this machine).
gives_up_after_max_restarts  two crashes, --max-restarts 1: a sentence
    naming --max-restarts, exit 1, two launches.
stops_without_a_checkpoint  a crash before the first checkpoint: one launch,
    a sentence, exit 1; a program that refuses its flags (exit 2) is not
    relaunched either.
bad_arguments  each bad dptrun command line: one line naming what is wrong,
    exit 2, nothing launched (MPIRUN and CH07_ZERO unused).

Exit 0 when the scenario behaves; otherwise prints what it saw and exits 1.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DPTRUN = str(Path(__file__).resolve().parents[3] / "scripts" / "dptrun")
# Ψ = 559 (32·15+15 + 15·4+4): not divisible by 3 or 4, so both re-shards pad.
RUN = ["--quiet", "--no-verify", "--model", "32-15-4", "--samples", "256", "--optimizer", "adamw",
       "--weight-decay", "0.05", "--lr", "0.01", "--steps", "10", "--comm-timeout", "20"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           ASAN_OPTIONS="detect_leaks=0")


def fail(what, output=""):
    print("FAILED: " + what)
    print("---- output ----\n" + output[-8000:])
    sys.exit(1)


def run(command, timeout=120):
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def dptrun(mpirun, own, program_args, timeout=120):
    return run([sys.executable, DPTRUN, "--mpirun", mpirun, "--oversubscribe"] + own + ["--"] + program_args,
               timeout)


def supervised(mpirun, own, program_args, says):
    """dptrun's run that must finish (exit 0) and print a line matching each of `says`; its output."""
    code, out, err = dptrun(mpirun, own, program_args)
    text = out + err
    if code != 0:
        fail(f"dptrun exited {code}, expected 0", text)
    expect_lines(text, says)
    return text


def expect_lines(text, says):
    for said in says:
        if not re.search(said, text):
            fail(f"no line matches /{said}/", text)


def equals_plain_resume(mpirun, program_args, step_dir, plain, weights, text):
    """The oracle: a plain mpirun -np 3 resumed from `step_dir`, not through dptrun, writes `plain`;
    the supervised run's final `weights` must equal it byte for byte."""
    code, out, err = run([mpirun, "--oversubscribe", "-np", "3"] + program_args + [
        "--resume", str(step_dir), "--save-weights", str(plain)])
    if code != 0:
        fail(f"the plain mpirun -np 3 --resume exited {code}", out + err)
    if weights.read_bytes() != plain.read_bytes():
        fail("the supervised run's final weights differ from the plain resume's on 3 ranks", text)


def resumes_on_fewer_ranks(mpirun, ch07, tmp):
    ck, supervised_weights, plain = tmp / "ck", tmp / "supervised.safetensors", tmp / "plain.safetensors"
    text = supervised(mpirun, ["-np", "4"], [ch07] + RUN + [
        "--batch", "6", "--save-checkpoint", str(ck), "--checkpoint-every", "2", "--fail", "2@5",
        "--save-weights", str(supervised_weights)],
        [r"dptrun: launch 1 failed .*rank 2 of 4 killed",
         r"dptrun: resuming from step 4 \(\S+step-00000004\) on 3 ranks, --batch 8 \(global batch 24 kept\)"
         r", dropping --fail 2@5",
         r"dptrun: launch 2: \S+ --oversubscribe -np 3 ", r"dptrun: summary: 2 launches, 1 restart"])
    launch2 = re.search(r"dptrun: launch 2: (.*)", text).group(1)
    if "--fail" in launch2:
        fail("the relaunch still carries the --fail that happened", text)
    # The run went on to the end on 3 ranks: its last checkpoint is step 10, of 3 shards.
    index = json.loads((ck / "step-00000010" / "index.json").read_text())
    if (ck / "latest").read_text().strip() != "step-00000010" or index.get("world") != 3:
        fail(f"the last checkpoint is not step 10 of 3 ranks (latest {(ck / 'latest').read_text()!r}, "
             f"world {index.get('world')})", text)
    equals_plain_resume(mpirun, [ch07, "--comm", "mpi"] + RUN + ["--batch", "8"], ck / "step-00000004", plain,
                        supervised_weights, text)
    print("ok: rank 2 of 4 killed at step 5; dptrun finished on 3 ranks from step 4, and its weights equal a "
          "plain mpirun -np 3 --resume's byte for byte")


def rolls_back_past_a_loss_spike(mpirun, ch07, tmp):
    # lr 0.1: the loss jumps about. The bound: just under the first step that rises above every step before it
    # (past step 2, so a checkpoint is sealed before it), read from a run without one.
    spiky = [("0.1" if a == "0.01" else "12" if a == "10" else a) for a in RUN] + ["--batch", "6"]
    metrics = tmp / "free.jsonl"
    code, out, err = run([mpirun, "--oversubscribe", "-np", "4", ch07, "--comm", "mpi"] + spiky +
                         ["--metrics", str(metrics)])
    if code != 0:
        fail(f"the run without --max-loss exited {code}", out + err)
    losses = [json.loads(line)["loss"] for line in metrics.read_text().splitlines()
              if line.strip() and json.loads(line).get("loss") is not None]
    spike = next((s for s in range(3, len(losses)) if losses[s] > max(losses[:s]) + 0.02), None)
    if spike is None:
        print("skipped: no step of this run rises above every step before it")
        sys.exit(77)
    ck, supervised, plain = tmp / "ck", tmp / "supervised.safetensors", tmp / "plain.safetensors"
    code, out, err = dptrun(mpirun, ["-np", "4"], [ch07] + spiky + [
        "--save-checkpoint", str(ck), "--checkpoint-every", "2", "--max-loss", f"{losses[spike] - 0.01:.6f}",
        "--save-weights", str(supervised)])
    text = out + err
    if code != 0:
        fail(f"dptrun exited {code}, expected 0", text)
    rollback = rf"dptrun: rolling back to step {spike - spike % 2} \(\S+\) on 4 ranks, skipping batch {spike} "
    expect_lines(text, [rf"dptrun: launch 1 stopped .*a loss spike at step {spike} \(batch {spike}\)", rollback])
    launches = re.findall(r"dptrun: launch \d+: (.*)", text)
    if any(" -np 4 " not in launch for launch in launches):
        fail("a relaunch after a loss spike changed the number of ranks", text)
    skips = re.findall(r"--skip-batch (\d+)", launches[-1])
    # The oracle: one plain run from step 0 that never draws those batches, no checkpoint, no rollback.
    code, out, err = run([mpirun, "--oversubscribe", "-np", "4", ch07, "--comm", "mpi"] + spiky +
                         [a for b in skips for a in ("--skip-batch", b)] + ["--save-weights", str(plain)])
    if code != 0:
        fail(f"the plain run with --skip-batch {' '.join(skips)} exited {code}", out + err)
    if supervised.read_bytes() != plain.read_bytes():
        fail(f"the rolled-back run's weights differ from a straight run skipping batches {skips}", text)
    print(f"ok: a loss spike at step {spike}: dptrun rolled back and skipped batches {', '.join(skips)}; its weights "
          "equal a straight run's that skips them, byte for byte")


def gives_up_after_max_restarts(mpirun, ch07, tmp):
    code, out, err = dptrun(mpirun, ["-np", "4", "--max-restarts", "1"], [ch07] + RUN + [
        "--batch", "6", "--save-checkpoint", str(tmp / "ck"), "--checkpoint-every", "2", "--fail", "3@3",
        "--fail", "1@6"])
    text = out + err
    if code != 1:
        fail(f"dptrun exited {code}, expected 1 (gave up)", text)
    if not re.search(r"dptrun: giving up: --max-restarts 1 allows no more relaunches after 1\.", text):
        fail("no sentence says --max-restarts 1 was reached", text)
    if len(re.findall(r"dptrun: launch \d+: ", text)) != 2 or not re.search(r"rank 1 of 3 killed", text):
        fail("expected two launches, the second losing rank 1 of 3", text)
    print("ok: a second crash with --max-restarts 1: dptrun gave up after 2 launches, exit 1")


def stops_without_a_checkpoint(mpirun, ch07, tmp):
    code, out, err = dptrun(mpirun, ["-np", "4"], [ch07] + RUN + [
        "--batch", "6", "--save-checkpoint", str(tmp / "ck"), "--checkpoint-every", "4", "--fail", "1@2"])
    text = out + err
    if code != 1 or not re.search(r"dptrun: giving up: launch 1 failed before it sealed a first checkpoint", text):
        fail(f"a crash before the first checkpoint: exit {code}, expected 1 and a sentence saying so", text)
    if len(re.findall(r"dptrun: launch \d+: ", text)) != 1:
        fail("a crash before the first checkpoint was relaunched", text)
    code, out, err = dptrun(mpirun, ["-np", "2"], [ch07] + RUN + [
        "--batch", "6", "--save-checkpoint", str(tmp / "ck2"), "--fail", "7@2"])
    text = out + err
    if code != 2 or len(re.findall(r"dptrun: launch \d+: ", text)) != 1 or "not relaunched" not in text:
        fail(f"a program that refused its flags: exit {code}, expected 2, one launch, 'not relaunched'", text)
    print("ok: no checkpoint, no relaunch (exit 1); refused flags, no relaunch (exit 2)")


def bad_arguments(mpirun, ch07, tmp):
    program = ["/bin/true", "--batch", "6", "--save-checkpoint", str(tmp / "ck")]
    cases = [
        ([], "'--'"),
        (["-np", "0", "--"] + program, "-np expects a whole number of at least 1"),
        (["-np", "four", "--"] + program, "-np expects a whole number"),
        (["--"] + program, "-np N is required"),
        (["-np", "4", "--max-restarts", "-1", "--"] + program, "--max-restarts expects a whole number"),
        (["-np", "4", "--min-ranks", "5", "--"] + program, "--min-ranks 5 is more than -np 4"),
        (["-np", "4", "--restarts", "2", "--"] + program, "unknown option '--restarts'"),
        (["-np", "4", "--"], "expects a program after '--'"),
        (["-np", "4", "--", "/bin/true", "--batch", "6"], "--save-checkpoint DIR"),
        (["-np", "4", "--", "/bin/true", "--save-checkpoint", "ck"], "--batch B"),
        (["-np", "4", "--"] + program + ["--comm", "threads"], "--comm is 'threads'"),
    ]
    for argv, expected in cases:
        code, out, err = run([sys.executable, DPTRUN] + argv, 30)
        lines = err.strip().splitlines()
        if code != 2 or out or len(lines) != 1 or not lines[0].startswith("dptrun: ") or expected not in lines[0]:
            fail(f"dptrun {' '.join(argv)}: exit {code}, expected 2 and one line on stderr with '{expected}'",
                 out + err)
    if (tmp / "ck").exists():
        fail("a refused command line launched something")
    print(f"ok: {len(cases)} bad command lines, each one line and exit 2")


def main():
    scenario, mpirun, ch07 = sys.argv[1:4]
    tmp = Path(tempfile.mkdtemp(prefix="dpt_dptrun_"))
    try:
        {"resumes_on_fewer_ranks": resumes_on_fewer_ranks, "gives_up_after_max_restarts": gives_up_after_max_restarts,
         "rolls_back_past_a_loss_spike": rolls_back_past_a_loss_spike,
         "stops_without_a_checkpoint": stops_without_a_checkpoint, "bad_arguments": bad_arguments}[scenario](
            mpirun, ch07, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
