#!/usr/bin/env python3
"""tests/test_case_names.py — every Catch2 case name survives ctest's discovery.

catch_discover_tests makes one ctest test per TEST_CASE name, and CMake reads a
';' in a name as a list separator: "a; b" became two tests named "a" and " b",
both failing (found when a fault-plan case was named so). A name also must not
repeat inside one test binary (tests/test_chNN*.cpp all join test_chNN;
tests/core/* join dpt_core_tests): Catch2 refuses to start such a binary.
Exit 1 listing each such name, with its file and line.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
name_re = re.compile(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)


def binary_of(path):
    """The test binary a source joins, as tests/CMakeLists.txt globs them."""
    rel = path.relative_to(root / "tests")
    if rel.parts[0] == "core":
        return "dpt_core_tests"
    m = re.match(r"test_(ch\d\d)", rel.name)
    return "test_" + m.group(1) if m and len(rel.parts) == 1 else str(rel.parent / rel.stem)


problems, seen = [], {}
for path in sorted((root / "tests").rglob("*.cpp")):
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in name_re.finditer(text):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        line = text.count("\n", 0, m.start()) + 1
        where = f"{path.relative_to(root)}:{line}"
        if ";" in name:
            problems.append(f"{where}: a ';' in \"{name}\": ctest would split it into {name.count(';') + 1} tests")
        key = (binary_of(path), name)
        if key in seen:
            problems.append(f"{where}: \"{name}\" also names a case at {seen[key]} in {key[0]}")
        seen.setdefault(key, where)
for p in problems:
    print(p)
print(f"test case names: {len(seen)} checked, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
