#!/usr/bin/env python3
"""test_reading_paths.py ROOT — every line count a chapter page states is the file's.

A chapter page's reading path tells a student how much there is to read:
table rows "| `path` | N |" and prose "`file.cpp` (N lines)" or "(N, ...)".
Those numbers drift whenever code moves (four sessions found them wrong by
hand). This checks each against the file: a table row's path from the
repository root, a prose file name in the page's own chapter folders
(chapters/NN_x/, exercises/NN_x/, then common/). A name no folder holds is an
error too, and a reading path's total ("**Reading path** (..., N lines)", "N lines in K
files") must be the sum of the table below it. Exit 0 when all match, 1 listing each mismatch, 77 (skipped) in a
handout: there the student's filled holes change exercises/' counts.
"""
import glob
import os
import re
import sys

TOTAL = re.compile(r"Reading path\*\*[^\n]*?(\d[\d,]*) lines|(\d[\d,]*) lines in \d+ files")
ROW = re.compile(r"^\|\s*`([^`\s]+)`\s*\|\s*(\d[\d,]*)\s*\|")
# Any reading-path row, for the total: "| `a.h`, the loop in `a.cpp` | 44 + 40 |" too.
ANY_ROW = re.compile(r"^\|[^|]*`[^|]*\|\s*(\d[\d,]*(?:\s*\+\s*\d[\d,]*)*)\s*\|")
PROSE = re.compile(r"`([A-Za-z0-9_./-]+\.(?:cpp|h|cuh|cu|py|md))` \((\d[\d,]*)(?: lines)?[,)]")


def lines(path):
    with open(path, errors="replace") as f:
        return sum(1 for _ in f)


def candidates(root, page, name):
    """Where a page's prose file name may live: as given, then the page's chapter folders."""
    yield os.path.join(root, name)
    m = re.match(r"ch(\d\d)_(.+)\.md$", os.path.basename(page))
    if m:
        for top in ("chapters", "exercises"):
            for folder in glob.glob(os.path.join(root, top, m.group(1) + "_*")):
                yield os.path.join(folder, name)
    for found in glob.glob(os.path.join(root, "common", "**", name), recursive=True):
        yield found


def check(root):
    errors, checked = [], 0
    for page in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        with open(page) as f:
            text = f.read().splitlines()
        for number, line in enumerate(text, 1):
            where = f"{os.path.relpath(page, root)}:{number}"
            total = TOTAL.search(line)
            if total:
                rows, seen_table = [], False
                for later in text[number:]:
                    if later.startswith("|"):
                        seen_table = True
                        m = ANY_ROW.match(later)
                        if m:
                            rows.append(sum(int(n.replace(",", "")) for n in m.group(1).split("+")))
                    elif seen_table:
                        break
                said = int((total.group(1) or total.group(2)).replace(",", ""))
                if rows and sum(rows) != said:
                    errors.append(f"{where}: the reading path says {said} lines in all; its table sums to {sum(rows)}")
            row = ROW.match(line)
            if row and "/" in row.group(1):
                path = os.path.join(root, row.group(1))
                if not os.path.isfile(path):
                    errors.append(f"{where}: the reading path names {row.group(1)}, which is not a file")
                    continue
                checked += 1
                said, real = int(row.group(2).replace(",", "")), lines(path)
                if said != real:
                    errors.append(f"{where}: says {row.group(1)} has {said} lines; it has {real}")
            for name, count in PROSE.findall(line):
                path = next((p for p in candidates(root, page, name) if os.path.isfile(p)), None)
                if path is None:
                    errors.append(f"{where}: names {name} ({count} lines), which no folder of its chapter holds")
                    continue
                checked += 1
                said, real = int(count.replace(",", "")), lines(path)
                if said != real:
                    errors.append(f"{where}: says {name} has {said} lines; {os.path.relpath(path, root)} has {real}")
    return errors, checked


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    if not os.path.isdir(os.path.join(root, "solutions")):
        print("reading paths: a handout (no solutions/): its exercises are the student's, not checked")
        sys.exit(77)
    errors, checked = check(root)
    for e in errors:
        print(e)
    print(f"reading paths: {checked} line counts checked, {len(errors)} wrong")
    sys.exit(1 if errors or checked == 0 else 0)
