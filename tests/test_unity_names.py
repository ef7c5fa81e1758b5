#!/usr/bin/env python3
"""No name is defined at file scope in two .cpp files of one build target.

The asan and tsan presets build in unity mode: CMake joins up to 16 of a
target's sources into one translation unit, so two files' file-local helpers
of one name (an anonymous namespace's `read_file`, two `kSmall`s, overloads
that become ambiguous) stop compiling there, and only there; which files
share a unit moves whenever a file is added. This check finds such pairs in
the plain build, before CI's sanitizer builds do: a definition at column 0
(a function, a constant, a struct or class, an alias) whose unqualified name
another file of the same target also defines. A helper two files need goes
to tests/support/ (or the library); otherwise rename one.

Usage: test_unity_names.py SOURCE_DIR. Exit 0 clean, 1 with the pairs listed.
"""
import collections
import pathlib
import re
import sys

FUNCTION = re.compile(r"^(?!TEST_CASE|TEMPLATE|SECTION|using|return|namespace|template)"
                      r"[A-Za-z_][\w:<>,*& ]*?[\s*&](\w+)\s*\([^;]*$")
CONSTANT = re.compile(r"^(?:static\s+)?(?:inline\s+)?(?:constexpr|const)\s+[\w:<>, *&]+?\s(\w+)\s*(?:=|\{|\[)")
TYPE = re.compile(r"^(?:struct|class|enum(?: class)?)\s+(\w+)\b[^;]*$")
ALIAS = re.compile(r"^(?:using|namespace)\s+(\w+)\s*=")


def names(path):
    """File-local names: defined at column 0 inside `namespace {` or `static`;
    an alias counts with what it names (two equal aliases are legal)."""
    found = set()
    stack = []  # True for an anonymous namespace
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        opened = re.match(r"^namespace\s*(\w[\w:]*)?\s*\{", line)  # not an alias: that has =
        if opened:
            stack.append(opened.group(1) is None)
            continue
        if re.match(r"^}\s*//\s*namespace\b", line) and stack:
            stack.pop()
            continue
        if not line or line[0] in " \t#/}":
            continue
        local = any(stack) or line.startswith("static ")
        alias = ALIAS.match(line)
        if alias:  # a namespace alias at file scope is file-local too
            if local or line.startswith("namespace"):
                found.add(alias.group(1) + " = " + line.split("=", 1)[1].strip())
            continue
        for pattern in (FUNCTION, CONSTANT, TYPE):
            m = pattern.match(line)
            if m and local and m.group(1) != "main" and not m.group(1).isupper():
                found.add(m.group(1))
                break
    return found


def clashes_in(where):
    """Names in two files; an alias clashes when one name means two things."""
    by_name = collections.defaultdict(set)
    for key, files in where.items():
        by_name[key.split(" = ")[0]].update(files)
    out = []
    for name, files in sorted(by_name.items()):
        meanings = [k for k in where if k.split(" = ")[0] == name]
        if len(files) > 1 and (len(meanings) > 1 or " = " not in meanings[0]):
            out.append((name, sorted(files)))
    return out


def targets(root):
    tests = root / "tests"
    yield "dpt_core_tests", sorted((tests / "core").glob("*.cpp"))
    for first in sorted(tests.glob("test_ch[0-9][0-9].cpp")):
        yield first.stem, [first] + sorted(tests.glob(first.stem + "_*.cpp"))
    for lib in ("core/src", "harness/src"):
        yield "common/" + lib, sorted((root / "common" / lib).glob("*.cpp"))
    for chapter in sorted((root / "chapters").glob("[0-9][0-9]_*")):
        own = [p for p in sorted(chapter.glob("*.cpp")) if p.name != "main.cpp"]
        yield "chapters/" + chapter.name, own + sorted((root / "solutions" / chapter.name).glob("*.cpp"))


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    clashes = []
    for target, files in targets(root):
        where = collections.defaultdict(list)
        for f in files:
            for n in names(f):
                where[n].append(f.relative_to(root).as_posix())
        clashes += [f"{target}: {n} in {', '.join(fs)}" for n, fs in clashes_in(where)]
    for c in clashes:
        print(c)
    print(f"unity names: {len(clashes)} name(s) defined in two files of one target")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main())
