#!/usr/bin/env python3
"""tests/grade/test_grade_class.py — scripts/grade-class on two fake submissions.

alice hands in a handout-shaped folder whose ch01 sgd_update is the reference
solution copied from solutions/; bob hands in a bare, untouched exercises/
tree. Chapter 1 only (-L ch01), so it builds one chapter's targets. The oracle:
alice has 1 of ch01's holes (counted as the stubs' NotImplemented throws, not
by the grader's own reading), bob 0, each gets a scoreboard, the CSV says so.
"""

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def stub_count(chapter_dir):
    """Holes in an untouched exercises/ chapter: one NotImplemented throw each."""
    return sum(len(re.findall(r"throw (?:dpt::)?NotImplemented\(", p.read_text()))
               for p in (ROOT / "exercises" / chapter_dir).glob("*.cpp"))


class GradeClass(unittest.TestCase):
    def test_two_submissions_get_their_scoreboards_and_a_csv(self):
        holes = stub_count("01_sgd")
        self.assertGreaterEqual(holes, 2)
        with tempfile.TemporaryDirectory(prefix="dpt-grade-class-") as tmp:
            subs = Path(tmp) / "subs"
            shutil.copytree(str(ROOT / "exercises"), str(subs / "alice" / "exercises"))
            shutil.copyfile(str(ROOT / "solutions" / "01_sgd" / "sgd.cpp"),
                            str(subs / "alice" / "exercises" / "01_sgd" / "sgd.cpp"))
            shutil.copytree(str(ROOT / "exercises"), str(subs / "bob"))
            (subs / "carol").mkdir()  # nothing handed in
            done = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade-class"), str(subs), "-L", "ch01"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                  env=dict(os.environ, PYTHONIOENCODING="utf-8"))
            self.assertEqual(done.returncode, 0, done.stdout)
            out = Path(str(subs) + ".grades")
            with open(str(out / "grades.csv")) as f:
                rows = {r["student"]: r for r in csv.DictReader(f)}
            self.assertEqual((rows["alice"]["ch01"], rows["alice"]["holes_done"], rows["alice"]["holes"]),
                             ("1/%d" % holes, "1", str(holes)))
            self.assertEqual(rows["bob"]["ch01"], "0/%d" % holes)
            self.assertEqual(rows["carol"]["build"], "no exercises/ found")
            alice = (out / "alice.txt").read_text()
            self.assertRegex(alice, r"✔ sgd_update +(\d+)/\1\b")  # every one of its tests, however many
            self.assertIn("not implemented: ch01: linear_backward", alice)
            self.assertIn("not implemented: ch01: sgd_update", (out / "bob.txt").read_text())
            shutil.rmtree(str(out))


if __name__ == "__main__":
    unittest.main(verbosity=2)
