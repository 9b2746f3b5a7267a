#!/usr/bin/env python3
"""Checks that each C++ source includes the C standard headers whose names it uses.

GCC 13's standard library headers no longer include <cstdint>, <cstdio> and <cstdlib> on the way, so
a source that used uint32_t, snprintf or getenv without including their header built with Debian 12's
GCC 12 and broke on the GPU machine's GCC 13 (2026-12-05, pipeline/http_url.h: a device call lost).
This check is textual and fast (ctest runs it); tools/check-gcc13-headers.sh compiles every source
against GCC 13's headers, which is thorough and slow.

  tools/lint-includes.py [ROOT]     exit 1 and one line per finding when a source lacks one
"""
import pathlib
import re
import subprocess
import sys

# (header, its C name, the uses that need it). A use preceded by '.', '->' or a name's '::' is a
# member or another namespace's function (pool.free(), fs::remove()), not the C library's.
NOT_MEMBER = r"(?<![\w.>:])(?:std::|::)?"
RULES = [
    ("cstdint", "stdint.h",
     re.compile(r"\b(?:std::)?u?int(?:8|16|32|64|ptr|max)_t\b|\bU?INT(?:8|16|32|64)_(?:MAX|MIN)\b")),
    ("cstdio", "stdio.h",
     re.compile(NOT_MEMBER + r"(?:f?printf|snprintf|vsnprintf|fopen|fclose|fputs|fgets|fwrite|fread|"
                r"fflush|perror|fileno|popen|pclose|sscanf|fscanf|fseek|ftell)\s*\(|\bstd::FILE\b|\bFILE\s*\*")),
    ("cstdlib", "stdlib.h",
     re.compile(NOT_MEMBER + r"(?:strto(?:l|ul|ll|ull|d|f)|malloc|calloc|realloc|getenv|setenv|unsetenv|"
                r"_Exit|atoi|atol|atof|mkstemp|mkdtemp|realpath|qsort)\s*\(|\bstd::(?:exit|abort|free)\b")),
]
SOURCES = ("*.h", "*.hpp", "*.cpp", "*.cc", "*.cu", "*.cuh")


def code_lines(text):
    """The source's lines with comments and string literals blanked, so prose never counts as a use."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    out = []
    for line in text.split("\n"):
        line = re.sub(r'R"(\w*)\(.*?\)\1"', '""', line)
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        line = re.sub(r"'(?:\\.|[^'\\])*'", "''", line)
        out.append(line.split("//", 1)[0])
    return out


def findings(path, text):
    includes = set(re.findall(r"^\s*#\s*include\s*<([^>]+)>", text, flags=re.M))
    lines = code_lines(text)
    for header, c_header, uses in RULES:
        if header in includes or c_header in includes:
            continue
        for number, line in enumerate(lines, 1):
            if line.lstrip().startswith("#include"):
                continue
            match = uses.search(line)
            if match:
                yield "%s:%d: uses %s but does not include <%s>" % (path, number, match.group(0).strip(), header)
                break


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard",
                             "--", *SOURCES], capture_output=True, text=True)
    if listed.returncode != 0:
        print("lint-includes: git ls-files failed in %s: %s" % (root, listed.stderr.strip()), file=sys.stderr)
        return 2
    paths = [p for p in listed.stdout.split("\n") if p]
    found = []
    for rel in paths:
        try:
            text = (root / rel).read_text(errors="replace")
        except OSError:
            continue  # listed but deleted in the working tree
        found.extend(findings(rel, text))
    for line in found:
        print(line)
    print("lint-includes: %d sources, %d without a standard header they use" % (len(paths), len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
