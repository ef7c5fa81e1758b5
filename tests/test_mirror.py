#!/usr/bin/env python3
"""tests/test_mirror.py — exercises/NN and solutions/NN are twins (CTest label core).

A student's exercises/ and the instructor's solutions/ must define the same
files and, per file, the same chapter functions (those the chapter header
chapters/NN_topic/chNN.h — or chNN_holes.h — declares), so either links into
the same chapter program. Helpers a solution keeps to itself (in an anonymous
namespace, not declared in the header) may differ. Skipped (exit 77) where
solutions/ is absent: a student handout.
"""

import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import holes  # noqa: E402


def declared(chapter):
    header = holes.chapter_header(ROOT, chapter)
    return set(holes.names(header.read_text(), False)) if header else None


def mismatches():
    exercises, solutions = holes.chapter_dirs(ROOT, "exercises"), holes.chapter_dirs(ROOT, "solutions")
    found = []
    for chapter in sorted(set(exercises) | set(solutions)):
        if chapter not in exercises or chapter not in solutions:
            have = "exercises" if chapter in exercises else "solutions"
            found.append("%s: only %s/ has it" % (chapter, have))
            continue
        names = declared(chapter)
        if names is None:
            found.append("%s: no chapter header chapters/NN_topic/%s.h" % (chapter, chapter))
            continue
        ours, theirs = holes.defined_in(exercises[chapter]), holes.defined_in(solutions[chapter])
        for file in sorted(set(ours) ^ set(theirs)):
            found.append("%s: %s exists only in %s/" % (chapter, file, "exercises" if file in ours else "solutions"))
        for file in sorted(set(ours) & set(theirs)):
            a, b = set(ours[file]) & names, set(theirs[file]) & names
            if a != b:
                found.append("%s/%s: exercises defines %s, solutions %s" % (chapter, file, sorted(a), sorted(b)))
        if not any(set(f) & names for f in ours.values()):
            found.append("%s: exercises/ defines none of the header's functions" % chapter)
    return found


if __name__ == "__main__":
    if not (ROOT / "solutions").is_dir():
        print("skipped: no solutions/ (a handout)")
        sys.exit(77)
    problems = mismatches()
    for line in problems:
        print("mirror: " + line)
    chapters = len(holes.chapter_dirs(ROOT, "exercises"))
    print("%d chapters, exercises/ and solutions/ %s" % (chapters, "differ" if problems else "define the same files and functions"))
    sys.exit(1 if problems else 0)
