#!/usr/bin/env python3
"""tests/grade/test_grade.py — scripts/grade over fixture results (CTest label grade).

The fixtures are what the grade listener writes (one JSON line per test case)
for a small repository, tests/grade/repo/: ch03 with two holes under the old
header name, ch04 with two holes and a provided ring_all_reduce. The oracle is
written by hand here: which rows, counts and reasons a student must see.
"""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRADE = HERE.parent.parent / "scripts" / "grade"


def grade(fixture, *args, columns=None):
    env = {"PYTHONIOENCODING": "utf-8", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}
    if columns:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, str(GRADE), "--json", str(HERE / fixture),
                           "--root", str(HERE / "repo")] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    return done.returncode, done.stdout


def records_of(fixture):
    return [json.loads(l) for l in (HERE / fixture).read_text().splitlines() if l.strip()]


def grade_records(records, *args, columns=None):
    """scripts/grade over these records (a list of dicts), written to a temporary file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
        return grade(str(path), *args, columns=columns)


def failed_check(record, info):
    """record, failing at a check whose INFO is `info`."""
    return dict(record, outcome="fail", failure={"file": "../../../tests/test_ch03.cpp", "line": 40,
                                                  "expression": "CHECK( mean == expected )",
                                                  "expansion": "0.5 == 0.25", "message": "", "info": [info]})


def row(output, name):
    """The scoreboard line of row `name` (its mark, name and count)."""
    return next((l for l in output.splitlines() if l[4:].startswith(name + " ")), "")


class Scoreboard(unittest.TestCase):
    def test_counts_only_the_holes_the_headers_declare(self):
        code, out = grade("untouched.jsonl")
        self.assertEqual(code, 1)
        self.assertIn("ch03   0 of 2 holes done, 0/3 tests passing", out)
        self.assertIn("ch04   0 of 2 holes done, 0/5 tests passing", out)
        self.assertIn("0 of 4 holes done", out)
        # the provided ring_all_reduce is listed after the holes, not counted as one
        self.assertLess(out.index("also checked"), out.index("ring_all_reduce "))

    def test_an_untouched_hole_says_which_file_to_open(self):
        code, out = grade("untouched.jsonl")
        self.assertIn("exercises/03_dp/dp.cpp", row(out, "shard_indices"))
        self.assertIn("not implemented: ch03 shard_indices — see exercises/03_dp/dp.cpp", out)

    def test_a_failed_check_shows_file_line_expression_and_values(self):
        code, out = grade("student.jsonl")
        self.assertEqual(code, 1)
        self.assertIn("tests/test_ch04.cpp:99: REQUIRE( sends_to_left == 0 ) — with expansion: 3 == 0 "
                      "(world = 4)", out)
        # a [hole:…] tag counts the test for that hole, whatever its name says
        self.assertIn("1/2", row(out, "ring_scatter_reduce"))
        self.assertIn("✘", row(out, "ring_scatter_reduce"))

    def test_dependencies_are_named(self):
        code, out = grade("student.jsonl")
        # the hole it stopped at (NotImplemented) first, then its tags still failing
        self.assertIn("needs ring_all_gather, ring_scatter_reduce", row(out, "ring_all_reduce"))
        self.assertIn("needs ch03's shard_indices", row(out, "chapter"))

    def test_a_row_never_needs_itself_or_a_hole_already_done(self):
        records = records_of("reference.jsonl")
        for r in records:  # ring_all_gather fails again, tagged as needing itself and a done hole
            if r.get("subject") == "ring_all_gather":
                r.update(outcome="fail", needs=["ring_all_gather", "ring_scatter_reduce"],
                         failure={"file": "tests/test_ch04.cpp", "line": 1, "expression": "x", "message": "",
                                  "info": []})
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.jsonl"
            path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
            code, out = grade(str(path))
        self.assertEqual(code, 1, out)
        self.assertIn("✘", row(out, "ring_all_gather"))
        self.assertNotIn("needs", row(out, "ring_all_gather"))

    def test_a_needed_hole_that_passes_is_not_named(self):
        # ch03's hole fails on its own check; the ch04 ring it is tagged as needing is done
        records = records_of("reference.jsonl")
        for r in records:
            if r["subject"] == "host_average_gradients":
                r.update(failed_check(r, "rank 1"), needs=["ring_scatter_reduce", "ring_all_gather", "ch04"])
        code, out = grade_records(records)
        self.assertEqual(code, 1, out)
        self.assertIn("✘", row(out, "host_average_gradients"))
        self.assertNotIn("needs", out)
        # once ch04's all-gather throws NotImplemented, only it is named: the scatter-reduce passes
        for r in records:
            if r["subject"] == "ring_all_gather":
                r.update(outcome="fail", not_implemented="ch04 ring_all_gather — see exercises/04_ring/ring.cpp")
        code, out = grade_records(records)
        self.assertIn("needs ch04's ring_all_gather", row(out, "host_average_gradients"))
        self.assertNotIn("ring_scatter_reduce", row(out, "host_average_gradients"))
        self.assertEqual(out.count("needs"), 1, out)  # and not on ch04's own rows

    def test_a_needed_hole_whose_tests_did_not_run_is_not_named(self):
        records = [r for r in records_of("reference.jsonl") if r["chapter"] == "ch03"]
        for r in records:
            if r["subject"] == "host_average_gradients":
                r.update(failed_check(r, "rank 1"), needs=["ring_all_gather", "ch04"])
        code, out = grade_records(records)
        self.assertEqual(code, 1, out)
        self.assertNotIn("needs", out)

    def test_needs_is_said_of_the_test_that_needs_it(self):
        # two failing tests of shard_indices; only the second uses the missing all-gather
        records = records_of("reference.jsonl")
        first = next(i for i, r in enumerate(records) if r["subject"] == "shard_indices")
        records[first] = failed_check(records[first], "slice of rank 0")
        records[first + 1] = dict(failed_check(records[first + 1], "rank 2's slice"), needs=["ring_all_gather"])
        for r in records:
            if r["subject"] == "ring_all_gather":
                r.update(failed_check(r, "chunk 1"))
        code, out = grade_records(records)
        self.assertNotIn("needs", row(out, "shard_indices"))
        lines = out.splitlines()
        second = next(l for l in lines if "shards cover the global batch exactly once" in l)
        self.assertIn("needs ch04's ring_all_gather", second)
        first_line = next(l for l in lines if "rank r gets the r-th contiguous slice" in l)
        self.assertNotIn("needs", first_line)

    def test_a_hole_met_inside_a_sentence_is_named_without_the_sentence(self):
        # ch11 runs its parts past an unwritten hole and prints "  (stopped: not implemented:
        # ch11: … .cpp)"; the listener keeps the line's rest, ")" included, and a message
        # says "ch11:" where the fixtures say "ch11".
        records = records_of("untouched.jsonl")
        records[0] = dict(records[0], not_implemented="ch04: ring_all_gather — see exercises/04_ring/ring.cpp)")
        code, out = grade_records(records)
        self.assertIn("not implemented: ch04: ring_all_gather — see exercises/04_ring/ring.cpp\n", out + "\n")
        self.assertNotIn("ring.cpp)", out)
        # the hole it names is still the one the row of that test needs
        self.assertIn("needs ch04's ring_all_gather", next(l for l in out.splitlines()
                                                          if records[0]["behaviour"] in l))

    def test_a_long_message_is_shown_whole_wrapped_at_words(self):
        explanation = ("parameter 0, element 3: the mean over the N = 7 lists (their sum is 1.7412; "
                       "a sum is not a mean) " * 4 + "and the caller's lists must be left unchanged: "
                       "per_sample is only read")
        records = records_of("reference.jsonl")
        records[2] = failed_check(records[2], explanation)
        for columns in (60, 100):
            code, out = grade_records(records, columns=columns)
            lines = out.splitlines()
            at = next(i for i, l in enumerate(lines) if "tests/test_ch03.cpp:40:" in l)
            shown = []
            for line in lines[at:]:
                if not line.startswith(" " * 10):
                    break
                self.assertLessEqual(len(line), columns, line)
                shown.append(line.strip())
            text = " ".join(shown)
            self.assertIn(explanation, text)  # all of it, every word whole
            self.assertTrue(text.endswith("per_sample is only read)"), text)
            self.assertNotIn("...", text)

    def test_all_passing_is_all_done_and_exit_0(self):
        code, out = grade("reference.jsonl")
        self.assertEqual(code, 0, out)
        self.assertIn("4 of 4 holes done", out)
        self.assertIn("✔", row(out, "ring_all_gather"))

    def test_one_chapter(self):
        code, out = grade("reference.jsonl", "-L", "ch03")
        self.assertIn("2 of 2 holes done", out)
        self.assertNotIn("ch04", out)

    def test_a_pattern_picks_chapters_as_ctest_does(self):
        code, out = grade("reference.jsonl", "-L", "ch0[34]")  # the fixture's chapters: 2 holes each
        self.assertEqual(code, 0, out)
        self.assertIn("4 of 4 holes done", out)
        code, out = grade("reference.jsonl", "-L", "ch04|ch05")
        self.assertIn("2 of 2 holes done", out)
        self.assertNotIn("ch03", out)


class ExpectHoles(unittest.TestCase):
    def test_untouched_holes_all_fail_with_not_implemented(self):
        code, out = grade("untouched.jsonl", "--expect-holes")
        self.assertEqual(code, 0, out)
        self.assertIn("8 chapter tests, 8 fail with NotImplemented on the untouched holes, 0 check provided code", out)

    def test_a_passing_test_of_provided_code_is_allowed_a_passing_hole_test_is_not(self):
        untouched = (HERE / "untouched.jsonl").read_text().splitlines()
        provided = {"test": "helper: does its job", "subject": "helper", "behaviour": "does its job",
                    "chapter": "ch03", "holes": [], "needs": [], "outcome": "pass"}
        tagged = dict(provided, test="helper: runs a hole", holes=["shard_indices"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.jsonl"
            path.write_text("\n".join(untouched + [json.dumps(provided)]) + "\n")
            code, out = grade(str(path), "--expect-holes")
            self.assertEqual(code, 0, out)
            self.assertIn("9 chapter tests, 8 fail with NotImplemented on the untouched holes, 1 check provided code", out)
            path.write_text("\n".join(untouched + [json.dumps(tagged)]) + "\n")
            code, out = grade(str(path), "--expect-holes")
            self.assertEqual(code, 1, out)
            self.assertIn("helper: runs a hole: passes on the untouched hole", out)

    def test_a_hole_no_test_checks_fails(self):
        untouched = [l for l in (HERE / "untouched.jsonl").read_text().splitlines()
                     if l.strip() and json.loads(l).get("subject") != "host_average_gradients"]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.jsonl"
            path.write_text("\n".join(untouched) + "\n")
            code, out = grade(str(path), "--expect-holes")
        self.assertEqual(code, 1, out)
        self.assertIn("ch03 host_average_gradients: no test checks this hole", out)

    def test_a_test_named_after_a_hole_without_its_colon_or_tag_is_named(self):
        # "hole does X" is shown under "also checked", not counted for the hole: the
        # trial of chapters 10-11 found four such tests scored as "1/1" holes.
        untouched = (HERE / "untouched.jsonl").read_text().splitlines()
        loose = {"test": "shard_indices covers every sample", "subject": "shard_indices covers every sample",
                 "behaviour": "", "chapter": "ch03", "holes": [], "needs": [], "outcome": "fail",
                 "not_implemented": "ch03 shard_indices — see exercises/03_dp/dp.cpp"}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.jsonl"
            path.write_text("\n".join(untouched + [json.dumps(loose)]) + "\n")
            code, out = grade(str(path), "--expect-holes")
            self.assertEqual(code, 1, out)
            self.assertIn("shard_indices covers every sample: names hole shard_indices but is not counted for it", out)
            path.write_text("\n".join(untouched + [json.dumps(dict(loose, holes=["shard_indices"]))]) + "\n")
            code, out = grade(str(path), "--expect-holes")
            self.assertEqual(code, 0, out)

    def test_a_test_that_passes_or_fails_otherwise_is_named(self):
        code, out = grade("student.jsonl", "--expect-holes")
        self.assertEqual(code, 1)
        self.assertIn("ring_scatter_reduce: rank r ends with the full sum of chunk (r+1) mod n: passes", out)
        self.assertIn("right neighbour: fails, but not with NotImplemented", out)


@unittest.skipUnless(os.environ.get("DPT_LISTENER_PROBE"), "DPT_LISTENER_PROBE not set (run it through ctest)")
class Listener(unittest.TestCase):
    """The grade listener, linked into a real Catch2 program (tests/grade/listener_probe.cpp)."""

    def records(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "out.jsonl"
            env = dict(os.environ, DPT_GRADE_JSON=str(path))
            subprocess.run([os.environ["DPT_LISTENER_PROBE"]], env=env, stdout=subprocess.DEVNULL)
            return {r["test"]: r for r in map(json.loads, path.read_text().splitlines())}

    def test_a_failed_check_is_recorded_with_tags_values_and_place(self):
        r = self.records()["probe_hole: a failed check with its values"]
        self.assertEqual((r["chapter"], r["subject"], r["holes"], r["needs"], r["outcome"]),
                         ("ch99", "probe_hole", ["probe_hole"], ["ch98"], "fail"))
        f = r["failure"]
        self.assertEqual((f["expression"], f["expansion"], f["info"]),
                         ("CHECK( world + 1 == 3 )", "5 == 3", ["world = 4"]))
        self.assertTrue(f["file"].endswith("listener_probe.cpp"), f["file"])
        self.assertNotIn("not_implemented", r)

    def test_not_implemented_and_passing_cases(self):
        records = self.records()
        self.assertEqual(len(records), 3)
        r = records["probe_other: a NotImplemented from a hole"]
        self.assertEqual(r["not_implemented"], "ch98 probe_dep — see exercises/98_probe/dep.cpp")
        self.assertEqual(r["outcome"], "fail")
        self.assertEqual(records["probe_other: passes"]["outcome"], "pass")


class CompilerErrors(unittest.TestCase):
    """A build that fails shows its first error with file:line, not the make noise before it."""

    OUTPUT = """[ 40%] Building CXX object chapters/01_sgd/CMakeFiles/dpt_ch01_holes.dir/sgd.cpp.o
/repo/exercises/01_sgd/sgd.cpp: In function 'void dpt::ch01::sgd_update(Tensor&, const Tensor&, float)':
/repo/exercises/01_sgd/sgd.cpp:17:3: error: 'parm' was not declared in this scope
   17 |   parm.data()[0] -= lr;
/repo/exercises/01_sgd/sgd.cpp:18:1: error: expected ';' before '}' token
gmake[2]: *** [chapters/01_sgd/CMakeFiles/dpt_ch01_holes.dir/build.make:76: sgd.cpp.o] Error 1
"""

    def test_first_error_with_file_and_line(self):
        loader = importlib.machinery.SourceFileLoader("grade", str(GRADE))
        grade = importlib.util.module_from_spec(importlib.util.spec_from_loader("grade", loader))
        loader.exec_module(grade)
        shown, count = grade.first_errors(self.OUTPUT)
        self.assertEqual(count, 2)
        self.assertEqual(shown[0], "/repo/exercises/01_sgd/sgd.cpp:17:3: error: 'parm' was not declared in this scope")
        self.assertNotIn("Building CXX", "\n".join(shown))
        self.assertFalse(any(line.startswith("gmake") for line in shown))


class BadInput(unittest.TestCase):
    def test_a_broken_line_is_named(self):
        code, out = grade("broken.jsonl")
        self.assertNotEqual(code, 0)
        self.assertIn("broken.jsonl:2 is not a JSON line", out)

    def test_a_missing_file_is_one_sentence(self):
        code, out = grade("no-such.jsonl")
        self.assertNotEqual(code, 0)
        self.assertIn("cannot read", out)
        self.assertNotIn("Traceback", out)

    def test_a_bad_label_is_a_usage_error(self):
        code, out = grade("reference.jsonl", "-L", "core")
        self.assertEqual(code, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
