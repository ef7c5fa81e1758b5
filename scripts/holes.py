"""scripts/holes.py — which functions are a chapter's holes, read from the sources.

A hole of chapter NN is a function the chapter header declares
(chapters/NN_topic/chNN.h, or chNN_holes.h before the rename) and
exercises/NN_topic/*.cpp defines. Functions the header declares that the
chapter itself provides (ch04's ring_all_reduce) are not holes. Used by
scripts/grade, scripts/grade-class, scripts/tour's handout mode and the
exercise/solution mirror test. Standard library only; parses simply: a
definition starts at column 0 with `type name(` and its body follows `)`.
"""

import re
from pathlib import Path

SIGNATURE = re.compile(r"^(?!namespace|using|struct|class|return|template|typedef|#|//|\s|\})"
                       r"[\w:<>,\s\*&]*?\b(?P<name>[A-Za-z_]\w*)\s*\(", re.M)


def chapter_dirs(root, tree):
    """{'ch04': Path('…/tree/04_ring_allreduce'), …} for tree = chapters, exercises, solutions."""
    found = {}
    for path in sorted((Path(root) / tree).glob("[0-9][0-9]_*")):
        if path.is_dir():
            found["ch" + path.name[:2]] = path
    return found


def chapter_header(root, chapter):
    """The chapter's header: chNN.h, or chNN_holes.h (the name before the rename); None if neither."""
    folder = chapter_dirs(root, "chapters").get(chapter)
    for name in (chapter + ".h", chapter + "_holes.h"):
        if folder and (folder / name).exists():
            return folder / name
    return None


def names(text, definitions):
    """Function names at column 0: definitions (a body follows the parameters) or declarations."""
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)
    found = []
    for match in SIGNATURE.finditer(text):
        depth, at = 1, match.end()
        while at < len(text) and depth:  # to the parameter list's closing parenthesis
            depth += {"(": 1, ")": -1}.get(text[at], 0)
            at += 1
        is_definition = re.match(r"\s*(const\s*)?(noexcept\s*)?\{", text[at:]) is not None
        if is_definition == definitions and match.group("name") not in found:
            found.append(match.group("name"))
    return found


def defined_in(folder):
    """{file name: [function names defined at column 0]} for folder/*.cpp."""
    return {p.name: names(p.read_text(errors="replace"), True) for p in sorted(Path(folder).glob("*.cpp"))}


def holes(root, chapter):
    """The chapter's holes in header order: declared there and defined in exercises/."""
    header = chapter_header(root, chapter)
    exercise = chapter_dirs(root, "exercises").get(chapter)
    if not exercise:
        return []
    defined = [n for names_in_file in defined_in(exercise).values() for n in names_in_file]
    if not header:
        return defined
    return [n for n in names(header.read_text(errors="replace"), False) if n in defined]


def hole_files(root, chapter):
    """{hole: 'exercises/NN_topic/file.cpp'}: where each hole is filled."""
    exercise = chapter_dirs(root, "exercises").get(chapter)
    where = {}
    for file, defined in (defined_in(exercise).items() if exercise else []):
        for name in defined:
            where.setdefault(name, "exercises/%s/%s" % (exercise.name, file))
    return where


if __name__ == "__main__":
    # python3 scripts/holes.py ch01 …  ->  one "chapter hole file" line per hole
    import sys
    root = Path(__file__).resolve().parent.parent
    for chapter in sys.argv[1:]:
        files = hole_files(root, chapter)
        for hole in holes(root, chapter):
            print("%s %s %s" % (chapter, hole, files.get(hole, "?")))
