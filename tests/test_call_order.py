#!/usr/bin/env python3
"""tests/test_call_order.py — no call reads what another of its arguments writes (CTest label core).

C++ leaves the order in which a call's arguments are evaluated unspecified.
In `f(g(&x, ...), x)` the compiler may read `x` before `g` has written it:
GCC did exactly that with `allocated_or_null(cudaMallocAsync(&ptr, ...), ptr)`
in common/backends/cuda/gpu_runtime.cpp, and every stream-ordered
allocation on an H100 read "no room" with 80 GB free (issue 29).

This scans every C++/CUDA source of the tree for a call one of whose
arguments passes `&x` to a nested call while another argument names `x`,
and fails naming file:line. What it cannot see: an out-parameter taken by
reference (`g(x)` with `g(T& x)`) — the types are not in the text.
Not flagged (sequenced, or evaluated later): the comma operator, braced
initializer lists, lambda bodies, ALL_CAPS macros such as DPT_CHECK (their
arguments are not a call's), `&x` handed to f itself (`f(&x, x)`).

    python3 tests/test_call_order.py [ROOT]    # exit 0: clean; 1: findings
"""

import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
FOLDERS = ("common", "bench", "chapters", "solutions", "exercises", "tests")
SUFFIXES = {".cpp", ".h", ".hpp", ".cu", ".cuh", ".cc"}
NOT_CALLS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "decltype", "alignof",
             "static_assert", "noexcept", "throw", "defined", "__attribute__", "alignas", "typeid"}
CASTS = {"static_cast", "reinterpret_cast", "const_cast", "dynamic_cast"}
IDENT = re.compile(r"[A-Za-z_]\w*")
CHAIN = re.compile(r"[A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*")


def blank_comments_and_literals(text):
    """`text` with comments, strings and chars turned to spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 digit separators
            raw = re.match(r'R"([^(\s]*)\(', text[i - 1:i + 20]) if c == '"' and i > 0 and text[i - 1] == "R" else None
            if raw:
                end = text.find(")" + raw.group(1) + '"', i)
                j = n if end < 0 else end + len(raw.group(1)) + 2
            else:
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
        i = j
    return "".join(out)


def callee_before(code, open_paren):
    """The identifier just before `(` at open_paren ('' when none: a grouping paren)."""
    j = open_paren - 1
    while j >= 0 and code[j].isspace():
        j -= 1
    if j >= 0 and code[j] == ">":  # a template argument list: static_cast<T>(...), f<T>(...)
        depth = 0
        while j >= 0:
            depth += {">": 1, "<": -1}.get(code[j], 0)
            if depth == 0:
                break
            j -= 1
        j -= 1
        while j >= 0 and code[j].isspace():
            j -= 1
    end = j + 1
    while j >= 0 and (code[j].isalnum() or code[j] == "_"):
        j -= 1
    return code[j + 1:end]


def matching(code, start, pairs):
    """Index of the bracket closing the one at `start`."""
    depth, i = 0, start
    while i < len(code):
        if code[i] in pairs:
            depth += 1
        elif code[i] in pairs.values():
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(code)


def arguments(code, open_paren, close_paren):
    """[(start, end)] of the call's top-level arguments."""
    spans, depth, start = [], 0, open_paren + 1
    for i in range(open_paren + 1, close_paren):
        c = code[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, close_paren))
    return spans


def written_through_nested_call(code, start, end):
    """Names x (or chains a.b) whose address `&x` an argument hands to a call inside it."""
    found, i = [], start
    while i < end:
        c = code[i]
        if c == "{":  # a lambda body or braced list: not evaluated as this argument
            i = matching(code, i, {"{": "}"}) + 1
            continue
        if c == "&" and code[i + 1:i + 2] != "&" and code[i - 1:i] != "&":
            before = code[start:i].rstrip()
            if not before or before[-1] in "(,=?:" or c_style_cast_ends(before):  # unary &, not a bitwise and
                m = CHAIN.match(code, i + 1 + (len(code[i + 1:]) - len(code[i + 1:].lstrip())))
                if m and inside_real_call(code, start, i):
                    found.append(re.sub(r"\s+", "", m.group(0)))
        i += 1
    return found


def c_style_cast_ends(before):
    """True when `before` ends in a C-style pointer cast such as `(void**)`."""
    return bool(re.search(r"\(\s*(?:const\s+)?[\w:<>\s]+\*+\s*\)$", before))


def inside_real_call(code, start, at):
    """True when position `at` sits in the parentheses of a call (not a cast or grouping) within [start, at)."""
    depth = 0
    for j in range(at - 1, start - 1, -1):
        if code[j] in ")]}":
            depth += 1
        elif code[j] in "([{":
            if depth == 0:
                name = callee_before(code, j) if code[j] == "(" else ""
                if name and name not in CASTS and name not in NOT_CALLS:
                    return True
            else:
                depth -= 1
    return False


def reads(code, start, end, chain):
    """True when code[start:end] (lambda bodies aside) names `chain`, or its root as a whole."""
    text = code[start:end]
    while True:  # lambda bodies, innermost first
        stripped = re.sub(r"\{[^{}]*\}", " ", text)
        if stripped == text:
            break
        text = stripped
    parts = chain.replace("->", ".").split(".")
    root = re.escape(parts[0])
    whole = r"(?<![\w.>:])" + r"\s*(?:\.|->)\s*".join(map(re.escape, parts)) + r"(?!\w)"
    alone = r"(?<![\w.>:&])" + root + r"(?!\w|\s*(?:\.|->|::|\())"
    return bool(re.search(whole, text)) or bool(re.search(alone, text))


def findings(text):
    """[(line, message)] for every call that reads what another of its arguments writes."""
    code, found = blank_comments_and_literals(text), []
    for m in re.finditer(r"\(", code):
        name = callee_before(code, m.start())
        if not name or name in NOT_CALLS or name in CASTS or re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            continue
        close = matching(code, m.start(), {"(": ")"})
        args = arguments(code, m.start(), close)
        if len(args) < 2:
            continue
        for a, (s, e) in enumerate(args):
            for chain in written_through_nested_call(code, s, e):
                for b, (s2, e2) in enumerate(args):
                    if b != a and reads(code, s2, e2, chain):
                        line = code.count("\n", 0, m.start()) + 1
                        found.append((line, "%s(...): argument %d passes &%s to a call that may write it, "
                                            "argument %d reads %s; C++ may evaluate either first"
                                      % (name, a + 1, chain, b + 1, chain)))
    return found


# The scanner's own check: each line a planted call (must be found) or a
# legal one (must not be).
PLANTED = [
    "void* p = allocated_or_null(cudaMallocAsync(&ptr, bytes, s), ptr);",
    "return allocated_or_null(cudaMalloc(&ptr, bytes), ptr);",
    "use(read_into(&s.field, n), s.field);",
    "use(read_into(&s, n), s.size);",
    "f(static_cast<int>(g(&x)), x + 1);",
    "return allocated_or_null(cudaMalloc((void**)&ptr, bytes), ptr);",
    "check(read(&n), [&] { return 1; }, n);",
]
LEGAL = [
    "DPT_CUDA_CHECK(cudaMalloc(&ptr, bytes));",
    "return allocated_or_null([&](void** out) { return cudaMalloc(out, bytes); });",
    "MPI_Send(&x, 1, MPI_INT, x, 0, comm);",
    "use(read_into(&s.a, n), s.b);",
    "f(g(&x), xs, x_count, other.x);",
    "if (g(&x), x) {}",
    "T t{g(&x), x};",
    "DPT_CHECK(cudaGetDevice(&d) == cudaSuccess, \"device \" << d);",
    "f(std::memcpy(&x, src, 4), \"x\");",
    "f(a & b, b);",
    "f((a) & b, b);",
    "f(g(&x), [&] { if (y) { use(x); } });",
]


def main():
    missed = [c for c in PLANTED if not findings(c)]
    wrong = [c for c in LEGAL if findings(c)]
    for c in missed:
        print("scanner broken: it does not flag the planted call  %s" % c)
    for c in wrong:
        print("scanner broken: it flags the legal call  %s" % c)
    if missed or wrong:
        return 1
    bad = 0
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in SUFFIXES:
                continue
            for line, message in findings(path.read_text(errors="replace")):
                print("%s:%d: %s" % (path.relative_to(ROOT), line, message))
                bad += 1
    if bad:
        print("%d call%s read%s a variable that another argument of the same call writes: "
              "write it in one statement, read it in the next" % (bad, "" if bad == 1 else "s", "s" if bad == 1 else ""))
        return 1
    print("no call reads what another of its arguments writes (%d planted calls found, %d legal ones passed)"
          % (len(PLANTED), len(LEGAL)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
