#!/usr/bin/env python3
"""Checks that no layer below the edges reads the environment: `getenv` (or `secure_getenv`)
appears in no source file under compiler/, runtime/, ffi/ or base/ (.c, .h, .inc, .def, .cc),
comments included. The edges that read it are plugin/env_options.c (the plugin, and the tools,
benchmarks and tests through tools/common/) and the programs themselves.

  check_no_getenv.py --root DIR                 check the tree at DIR
  check_no_getenv.py --root DIR --plant FILE    the same with FILE (relative to DIR, e.g.
                                                runtime/planted.c) added, holding a getenv
                                                call: must fail naming it
  check_no_getenv.py --self-test                a planted call in each folder is caught, one
                                                outside them and words like `getenviron` are not
Exit status 0 when nothing is found, 1 otherwise (each hit printed as path:line: text)."""
import argparse
import os
import re
import sys
import tempfile

FOLDERS = ("compiler", "runtime", "ffi", "base")
SUFFIXES = (".c", ".h", ".inc", ".def", ".cc")
CALL = re.compile(r"\b(secure_)?getenv\b")
PLANTED = '#include <stdlib.h>\nconst char *kiln_planted(void) { return getenv("HOME"); }\n'


def hits_in(path, rel, text=None):
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    return [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if CALL.search(line)]


def check(root, planted=None):
    hits = []
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SUFFIXES):
                    path = os.path.join(dirpath, name)
                    hits += hits_in(path, os.path.relpath(path, root))
    if planted:
        top = planted.split("/", 1)[0]
        if top in FOLDERS and planted.endswith(SUFFIXES):
            hits += hits_in(None, planted, PLANTED)
    return hits


def report(hits):
    for h in hits:
        print(f"getenv below the edges: {h}")
    if hits:
        print(f"{len(hits)} read(s) of the environment in {', '.join(FOLDERS)}: move them to "
              "plugin/env_options.c and pass options down")
    return 1 if hits else 0


def self_test():
    ok = True
    with tempfile.TemporaryDirectory() as root:
        clean = {
            "base/a.c": "/* the edges read KILN_LOG */\nint a(void) { return 0; }\n",
            "runtime/b.h": "int getenviron_count(void);\nint my_getenv_cache;\n",
            "plugin/env_options.c": PLANTED,  # an edge: allowed
            "tools/x.c": PLANTED,
        }
        for rel, text in clean.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        if check(root):
            print("self-test: a clean tree was reported:", check(root))
            ok = False
        for folder in FOLDERS:
            for name in ("planted.c", "sub/planted.h", "planted.def"):
                rel = f"{folder}/{name}"
                hits = check(root, rel)
                if len(hits) != 1 or not hits[0].startswith(rel + ":2:"):
                    print(f"self-test: the getenv planted in {rel} was not caught: {hits}")
                    ok = False
        path = os.path.join(root, "compiler/codegen/x.c")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("static const char *v(void) { return secure_getenv(\"X\"); }\n")
        if len(check(root)) != 1:
            print("self-test: secure_getenv in compiler/codegen was not caught")
            ok = False
    print("self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root")
    ap.add_argument("--plant")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.root:
        ap.error("--root or --self-test")
    return report(check(a.root, a.plant))


if __name__ == "__main__":
    sys.exit(main())
