"""Exit codes of a dpt test program, as CTest reads them (SKIP_RETURN_CODE 4).

Catch2 2, and Catch2 3 before 3.7.1, exit with the number of failed
assertions; 4 is also the code of a skipped test. tests/support/catch_main.cpp
turns a 4 that came with failures into 5: this runs the grade listener probe's
hidden cases and checks that four failures are a failure, not a skip, and that
a skip is still 4.
"""
import os
import subprocess
import sys

probe = os.environ["DPT_LISTENER_PROBE"]


def exit_code(tag):
    env = dict(os.environ)
    env.pop("DPT_GRADE_JSON", None)
    return subprocess.run([probe, tag], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env).returncode


failures = []
four = exit_code("[.exit_four]")
if four in (0, 4):
    failures.append(f"four failed checks exited {four}: CTest reads that as {'a pass' if four == 0 else 'a skip'}")
skip = exit_code("[.exit_skip]")
if skip != 4:
    failures.append(f"a skipped test exited {skip}, not 4 (CTest's SKIP_RETURN_CODE)")
for line in failures:
    print("FAIL:", line)
print(f"four failures -> exit {four}, a skip -> exit {skip}")
sys.exit(1 if failures else 0)
