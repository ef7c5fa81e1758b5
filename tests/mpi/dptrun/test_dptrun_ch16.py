#!/usr/bin/env python3
"""scripts/dptrun against real mpirun jobs of chapter 16 (docs/ch16_restarts.md).

    test_dptrun_ch16.py SCENARIO MPIRUN CH16_FAULT_TOLERANCE

ch16_resumes_on_fewer_ranks  -np 4, rank 2 killed at step 5 (--fail 2@5):
    dptrun finishes the run on 3 ranks from the checkpoint of step 4, the
    last launch's verdicts on the whole run all hold (the ledger, carried in
    the checkpoint, consumed every sample once; the run equals its one-device
    replay; the quorum id changed with the membership), and its final
    weights equal, byte for byte, a plain `mpirun -np 3 ... --resume
    DIR/step-00000004` (the issue's "done when").
ch16_counts_a_frozen_rank_lost  -np 4, rank 1 frozen at step 5: a peer's
    bounded wait (--comm-timeout) names it, dptrun counts it lost and
    finishes on 3 ranks with every verdict holding.
ch16_grows_on_a_join  -np 3, --join 3@6: the launch seals step 6 and ends
    asking for 4 processes (exit 4 under a plain mpirun); dptrun relaunches
    on 4 from step 6 (a membership change, no restart counted), the quorum
    id changes, and every verdict on the whole run holds.

Exit 0 when the scenario behaves; otherwise prints what it saw and exits 1.
"""
import re
import shutil
import sys
import tempfile
from pathlib import Path

from test_dptrun import equals_plain_resume, fail, run, supervised  # chapter 07's launcher, oracle and report

# Ψ = 1386 (32·32+32 + 32·10+10); 12 steps of 32 samples: one epoch of 128 and a half.
# The id's law over every launch's committed steps: two launches, two memberships, two ids.
LEDGER_IDS = (r"✔ a quorum's id is never taken for another quorum's: kept while the members are, never reused, "
              r"across every launch \(the ledger\) — 2 quorum ids")
RUN16 = ["--quiet", "--steps", "12", "--samples", "256", "--batch", "8", "--comm-timeout", "20"]


def verdicts_hold(text, launch):
    """The last launch's verdicts: all hold, and the ones the restart tests are named."""
    if "✘" in text or not re.search(r"all \d+ checks passed", text):
        fail(f"launch {launch}'s verdicts do not all hold", text)


def ch16_resumes_on_fewer_ranks(mpirun, ch16, tmp):
    ck, weights, plain = tmp / "ck", tmp / "supervised.safetensors", tmp / "plain.safetensors"
    text = supervised(mpirun, ["-np", "4"], [ch16] + RUN16 + [
        "--save-checkpoint", str(ck), "--checkpoint-every", "2", "--fail", "2@5", "--save-weights", str(weights)],
        [r"dptrun: launch 1 failed .*rank 2 of 4 killed",
         r"dptrun: resuming from step 4 \(\S+step-00000004\) on 3 ranks, --batch as given",
         r"dptrun: launch 2: \S+ --oversubscribe -np 3 ", r"dptrun: summary: 2 launches, 1 restart", LEDGER_IDS])
    verdicts_hold(text, 2)
    equals_plain_resume(mpirun, [ch16, "--comm", "mpi"] + RUN16, ck / "step-00000004", plain, weights, text)
    print("ok: rank 2 of 4 killed at step 5; dptrun finished on 3 ranks from step 4 with every verdict on the whole "
          "run holding, and its weights equal a plain mpirun -np 3 --resume's byte for byte")


def ch16_counts_a_frozen_rank_lost(mpirun, ch16, tmp):
    args = [a if a != "20" else "3" for a in RUN16]  # --comm-timeout 3 (as tests/mpi/faults): found in seconds
    text = supervised(mpirun, ["-np", "4"], [ch16] + args + [
        "--save-checkpoint", str(tmp / "ck"), "--checkpoint-every", "2", "--fail", "1@5:freeze"],
        [r"rank 1 of 4: --fail 1@5:freeze: this process stops answering", r"then rank 1 did not answer within",
         r"dptrun: launch 1 failed .*rank 1 of 4 silent",
         r"dptrun: resuming from step 4 \S+ on 3 ranks.*dropping --fail 1@5:freeze"])
    verdicts_hold(text, 2)
    print("ok: rank 1 of 4 froze at step 5; a peer's bounded wait named it, dptrun finished on 3 ranks")


def ch16_grows_on_a_join(mpirun, ch16, tmp):
    code, out, err = run([mpirun, "--oversubscribe", "-np", "3", ch16, "--comm", "mpi"] + RUN16 + [
        "--save-checkpoint", str(tmp / "plain"), "--join", "3@6"])
    if code != 4 or not (tmp / "plain" / "step-00000006" / "COMPLETE").is_file():
        fail(f"a plain mpirun with --join 3@6 exited {code} (expected 4, step 6 sealed)", out + err)
    text = supervised(mpirun, ["-np", "3"], [ch16] + RUN16 + [
        "--save-checkpoint", str(tmp / "ck"), "--checkpoint-every", "4", "--join", "3@6"],
        [r"--join 3@6: sealed step 6 in \S+; this launch ends, and a relaunch on 4 processes",
         r"dptrun: launch 1 ended for --join 3@6: relaunching from step 6 \S+ on 4 ranks", LEDGER_IDS,
         r"dptrun: summary: 2 launches, 0 restarts"])
    verdicts_hold(text, 2)
    print("ok: --join 3@6 sealed step 6 and ended the launch of 3; dptrun finished on 4 ranks, every verdict holding")


def main():
    scenario, mpirun, ch16 = sys.argv[1:4]
    tmp = Path(tempfile.mkdtemp(prefix="dpt_dptrun16_"))
    try:
        {"ch16_resumes_on_fewer_ranks": ch16_resumes_on_fewer_ranks,
         "ch16_counts_a_frozen_rank_lost": ch16_counts_a_frozen_rank_lost,
         "ch16_grows_on_a_join": ch16_grows_on_a_join}[scenario](mpirun, ch16, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
