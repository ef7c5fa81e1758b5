#!/usr/bin/env python3
"""Fault tests under a real mpirun: what docs/cluster.md promises when a rank
freezes, dies, or every rank fails at once.

    test_faults.py SCENARIO MPIRUN FAULT_DRIVER

frozen_*  SIGSTOP one rank mid-run. The rank that waits on it times out after
          --comm-timeout; every rank that knows of the failure then waits at
          most min(timeout, 5 s) + 1 s for the frozen one, prints one line
          naming it and ends the job with MPI_Abort.
killed_*  SIGKILL one rank mid-run: mpirun notices the death and ends the job,
          naming the rank.
every_rank_fails_np4  every rank throws at once: each rank's error is one
          whole line ("fault_driver: error: [rank R] ..."), never interleaved.

Exit 0 when the scenario behaves; otherwise prints what it saw and exits 1.
Every process this starts is ended before it returns (its own session).
"""
import os
import re
import signal
import subprocess
import sys
import time

COMM_TIMEOUT = 3.0  # --comm-timeout given to the job
# From the signal to the job's end: the failing wait (the timeout), the grace
# finish() gives a silent rank (min(timeout, 5 s) + 1 s), and room for mpirun
# to kill the processes on a loaded 2-core machine.
FROZEN_BOUND = COMM_TIMEOUT + min(COMM_TIMEOUT, 5.0) + 1.0 + 8.0
KILLED_BOUND = 8.0


def start(mpirun, driver, np, pattern, seconds=120):
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(np), driver, "--comm", "mpi",
           "--comm-timeout", str(COMM_TIMEOUT), "--pattern", pattern, "--seconds", str(seconds)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def pids_of(job, np):
    """Reads "rank R pid P" lines until every rank has said its pid."""
    pids = {}
    while len(pids) < np:
        line = job.stdout.readline()
        if not line:
            break
        m = re.match(r"rank (\d+) pid (\d+)", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
    return pids


def end_everything(job, pids):
    for pid in pids.values():
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    job.wait()


def fail(what, out="", err=""):
    print("FAILED: " + what)
    print("---- stdout ----\n" + out[-4000:])
    print("---- stderr ----\n" + err[-6000:])
    sys.exit(1)


def signal_one_rank(mpirun, driver, np, pattern, sig, bound, victim=1):
    job = start(mpirun, driver, np, pattern)
    pids = pids_of(job, np)
    if len(pids) < np:
        end_everything(job, pids)
        fail(f"only {len(pids)} of {np} ranks started", "", job.stderr.read())
    time.sleep(1.0)  # the ranks are talking
    os.kill(pids[victim], sig)
    sent = time.monotonic()
    try:
        out, err = job.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        end_everything(job, pids)
        out, err = job.communicate()
        fail(f"{signal.Signals(sig).name} to rank {victim} of {np} ({pattern}): the job was still running "
             f"{bound:.0f} s later (bound: --comm-timeout {COMM_TIMEOUT:g} s + grace + launcher)", out, err)
    took = time.monotonic() - sent
    end_everything(job, pids)  # the frozen rank, if the launcher left it
    return job.returncode, took, out, err


def frozen(mpirun, driver, np, pattern):
    code, took, out, err = signal_one_rank(mpirun, driver, np, pattern, signal.SIGSTOP, FROZEN_BOUND)
    if code == 0:
        fail("the job exited 0 though rank 1 was frozen", out, err)
    if not re.search(r"fault_driver: error: .*rank 1 did not answer within", err):
        fail("no line of stderr names rank 1 as the rank that did not answer", out, err)
    if not re.search(r"\[rank \d\] rank \d waited 3\.0 s in", err):
        fail("no line of stderr says which rank timed out waiting", out, err)
    # On a ring the rank after the frozen one waits on it by name: the message
    # must say that rank 1 may have stopped, not only blame the send order.
    if pattern == "ring" and not re.search(r"rank 1 (has sent this rank nothing|sends nothing to this rank either|"
                                           r"began sending this message and never finished|has not taken it)"
                                           r"[^;]*stopped", err):
        fail("the timeout does not say that rank 1, which it waited on, may have stopped", out, err)
    print(f"ok: rank 1 of {np} frozen ({pattern}): the job ended {took:.1f} s after SIGSTOP, "
          f"exit {code}, naming rank 1 (bound {FROZEN_BOUND:.0f} s)")


def killed(mpirun, driver, np, pattern):
    code, took, out, err = signal_one_rank(mpirun, driver, np, pattern, signal.SIGKILL, KILLED_BOUND)
    if code == 0:
        fail("the job exited 0 though rank 1 was killed", out, err)
    # Open MPI 4 says "mpirun noticed that process rank 1 … exited on signal 9
    # (Killed)" on one line; Open MPI 5 says "prterun noticed …" and wraps it.
    if not re.search(r"rank 1 .*?(signal 9|Killed)", " ".join((out + err).split())):
        fail("nothing printed names rank 1 as killed", out, err)
    print(f"ok: rank 1 of {np} killed ({pattern}): the job ended {took:.1f} s after SIGKILL, exit {code}")


def every_rank_fails(mpirun, driver, np):
    line = re.compile(r"^fault_driver: error: \[rank (\d)\] rank \1 fails on purpose, as every rank does at once$")
    for attempt in range(3):
        job = start(mpirun, driver, np, "error")
        try:
            out, err = job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            end_everything(job, {})
            fail("every rank failed at once, and the job did not end in 60 s")
        errors = [l for l in err.splitlines() if "fault_driver" in l]
        bad = [l for l in errors if not line.match(l)]
        if job.returncode == 0 or bad or len(errors) != np:
            fail(f"attempt {attempt + 1}: expected {np} whole lines 'fault_driver: error: [rank R] rank R fails "
                 f"...', one per rank; {len(bad)} of {len(errors)} are not whole", out, err)
    print(f"ok: {np} ranks failing at once print {np} whole lines, 3 times out of 3")


def main():
    scenario, mpirun, driver = sys.argv[1:4]
    m = re.match(r"(frozen|killed)_(ring|allreduce)_np(\d)$", scenario)
    if m:
        (frozen if m.group(1) == "frozen" else killed)(mpirun, driver, int(m.group(3)), m.group(2))
    elif scenario == "every_rank_fails_np4":
        every_rank_fails(mpirun, driver, 4)
    else:
        fail("unknown scenario " + scenario)


if __name__ == "__main__":
    main()
