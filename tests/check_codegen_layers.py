#!/usr/bin/env python3
"""Checks that compiler/codegen/ is layered one way: the graph of modules built from
`#include "compiler/codegen/..."` lines and from the object files' symbols (module A uses
module B when A's object references a symbol B's object defines) has no cycle, and no hero
emitter uses another.

A module is a file stem; files sharing a prefix listed in GROUPS form one module (their
internal header included), e.g. reduction_emitter.c + reduction_kinds.c + reduction_internal.h.

  check_codegen_layers.py --source DIR --objects DIR   check the tree (objects: the build dir,
                                                        searched for compiler/codegen/*.c.o)
  check_codegen_layers.py --headers ROOT               the public emitter headers (*_emitter.h,
                                                        fusion_kernel.h) pull in neither LLVM-C
                                                        nor the elemental emitter's internals
  check_codegen_layers.py --self-test                  shows that a planted cycle and a planted
                                                        emitter-to-emitter edge are caught
Exit status 0 when the graph is acyclic and layered, 1 otherwise (the cycle is printed)."""
import argparse
import glob
import os
import re
import subprocess
import sys

GROUPS = [("kir", "kir"), ("elemental", "elemental"), ("reduction_", "reduction_emitter")]
INCLUDE = re.compile(r'^\s*#\s*include\s+"compiler/codegen/([A-Za-z0-9_]+)\.h"', re.M)


def module_of(stem):
    for prefix, mod in GROUPS:
        if stem == prefix or stem.startswith(prefix):
            return mod
    return stem


def is_emitter(mod):
    return mod.endswith("_emitter")


def include_edges(src_dir):
    edges = {}
    for path in sorted(glob.glob(os.path.join(src_dir, "*.[ch]"))):
        a = module_of(os.path.splitext(os.path.basename(path))[0])
        with open(path, encoding="utf-8") as f:
            for h in INCLUDE.findall(f.read()):
                b = module_of(h)
                if a != b:
                    edges.setdefault((a, b), "includes %s.h (%s)" % (h, os.path.basename(path)))
    return edges


def nm_symbols(obj):
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, used


def call_edges(src_dir, obj_dir):
    sources = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(src_dir, "*.c"))}
    objs = {}
    for o in glob.glob(os.path.join(obj_dir, "**", "compiler", "codegen", "*.c.o"), recursive=True):
        stem = os.path.basename(o)[:-len(".c.o")]
        if stem in sources:  # stale objects of removed files do not count
            objs.setdefault(stem, o)
    missing = sources - set(objs)
    if missing:
        sys.exit("check_codegen_layers: no object file for %s under %s" % (sorted(missing), obj_dir))
    owner, uses = {}, {}
    for stem, o in objs.items():
        d, u = nm_symbols(o)
        for s in d:
            owner[s] = module_of(stem)
        uses[stem] = u
    edges = {}
    for stem, u in uses.items():
        a = module_of(stem)
        for s in sorted(u):
            b = owner.get(s)
            if b and b != a:
                edges.setdefault((a, b), "calls %s (%s.c)" % (s, stem))
    return edges


def find_cycle(edges):
    """A cycle as a list of modules [m0, m1, ..., m0], or None."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    color, stack = {}, []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(succ[n]):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not color.get(m):
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(succ):
        if not color.get(n):
            c = visit(n)
            if c:
                return c
    return None


def check(edges):
    """Problems found in `edges` ({(a, b): why}) as lines; empty when layered."""
    problems = []
    cycle = find_cycle(edges)
    if cycle:
        problems.append("cycle: " + " -> ".join(cycle))
        for a, b in zip(cycle, cycle[1:]):
            problems.append("  %s -> %s: %s" % (a, b, edges[(a, b)]))
    for (a, b), why in sorted(edges.items()):
        if is_emitter(a) and is_emitter(b):
            problems.append("emitter %s uses emitter %s: %s" % (a, b, why))
    return problems


def order(edges):
    """Modules bottom-up (a module after everything it uses)."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
    done, out = set(), []

    def visit(n):
        if n in done:
            return
        done.add(n)
        for m in sorted(succ[n]):
            visit(m)
        out.append(n)

    for n in sorted(succ):
        visit(n)
    return out


def self_test():
    ok = True
    layered = {("fusion_compiler", "loop_emitter"): "t", ("loop_emitter", "hero_emit"): "t",
               ("reduction_emitter", "hero_emit"): "t", ("hero_emit", "fusion_kernel"): "t"}
    if check(layered):
        print("self-test: a layered graph was rejected: %s" % check(layered))
        ok = False
    planted = dict(layered)
    planted[("fusion_kernel", "fusion_compiler")] = "planted"
    p = check(planted)
    if not p or not p[0].startswith("cycle: "):
        print("self-test: the planted cycle fusion_kernel -> fusion_compiler was not caught")
        ok = False
    else:
        print("self-test: planted cycle caught: %s" % p[0])
    selfloop = {("a", "b"): "t", ("b", "b"): "planted"}
    if not find_cycle(selfloop):
        print("self-test: a self-loop was not caught")
        ok = False
    sideways = dict(layered)
    sideways[("loop_emitter", "reduction_emitter")] = "planted"
    p = check(sideways)
    if not any("emitter loop_emitter uses emitter reduction_emitter" in x for x in p):
        print("self-test: the planted emitter-to-emitter edge was not caught")
        ok = False
    else:
        print("self-test: planted emitter-to-emitter edge caught")
    if module_of("reduction_kinds") != "reduction_emitter" or module_of("kir_llvm") != "kir":
        print("self-test: grouping is wrong")
        ok = False
    return 0 if ok else 1


ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]', re.M)
HIDDEN = ("llvm-c/", "compiler/codegen/elemental_internal.h", "compiler/codegen/hero_emit.h")


def header_leaks(root, header):
    """The hidden headers `header` reaches through the repository's own includes, with the
    include chain to the first of each."""
    leaks, seen, worklist = {}, set(), [(header, [header])]
    while worklist:
        h, chain = worklist.pop()
        if h in seen:
            continue
        seen.add(h)
        path = os.path.join(root, h)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for inc in ANY_INCLUDE.findall(f.read()):
                if any(inc.startswith(x) for x in HIDDEN):
                    leaks.setdefault(inc, chain + [inc])
                else:
                    worklist.append((inc, chain + [inc]))
    return leaks


def check_headers(root):
    bad = 0
    hdrs = sorted(glob.glob(os.path.join(root, "compiler/codegen/*_emitter.h")))
    hdrs.append(os.path.join(root, "compiler/codegen/fusion_kernel.h"))
    for path in hdrs:
        rel = os.path.relpath(path, root)
        for inc, chain in sorted(header_leaks(root, rel).items()):
            print("%s pulls in %s: %s" % (rel, inc, " -> ".join(chain)))
            bad += 1
    print("%d public emitter headers, %s" % (len(hdrs), "FAILED" if bad else "none pulls LLVM-C or emitter internals"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--objects")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--headers", metavar="ROOT")
    ap.add_argument("--plant", metavar="A:B", help="add an edge A -> B (to see a failure)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if a.headers:
        return check_headers(a.headers)
    if not a.source or not a.objects:
        ap.error("--source and --objects are required")
    inc = include_edges(a.source)
    calls = call_edges(a.source, a.objects)
    edges = dict(inc)
    for k, v in calls.items():
        edges.setdefault(k, v)
    if a.plant:
        x, y = a.plant.split(":")
        edges[(x, y)] = "planted by --plant"
    problems = check(edges)
    for p in problems:
        print(p)
    if a.verbose or not problems:
        print("modules bottom-up: " + " ".join(order(edges)))
    if a.verbose:
        for (x, y), why in sorted(edges.items()):
            print("  %s -> %s: %s" % (x, y, why))
    print("%d include edges, %d call edges, %s" % (len(inc), len(calls), "FAILED" if problems else "no cycle"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
