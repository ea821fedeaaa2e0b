#!/usr/bin/env python3
"""cycles.py - lists the include and call cycles between the product's files.

A file depends on another when it includes it (`#include "..."`, resolved as
the compiler does: beside the file, then along the build's -I directories) or
calls a function (uses a symbol) the other defines. Calls are read from the
built objects with `nm`, not guessed from the text: an object's undefined
symbols are matched to the object of the same link target that defines them
(else to the one object anywhere that does). A cycle is a strongly connected
set of two or more files (a header and the C file that defines what it
declares are two: the header depends on nothing for its declarations). Dependencies
between two units of one core folder (CORES below: the places allowed to be
a knot, each the one core its folder's other files stand on) do not count.

    scripts/cycles.py BUILD_DIR                  list every cycle, exit 0
    scripts/cycles.py BUILD_DIR --check BASELINE exit 1 on a cycle BASELINE
                                                 does not hold

BASELINE (scripts/cycles.baseline) lists the cycles that existed when the
check was added (issue 29), one per line as its units joined by spaces: a
cycle is allowed only if all its units lie within one baseline line, so the
knots can shrink and never grow; a line no longer needed is reported, to be
deleted. BUILD_DIR must have compile_commands.json (the top CMakeLists.txt
exports it) and its objects built.

Written by hand: no packaged tool joins nm's symbols with a CMake build's
compile commands into a file-level graph (cflow and cscope read text only and
know nothing of link targets).
"""
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

# Folders whose files may depend on each other in a cycle: the cores.
CORES = ("interpose/core/", "sim/core/", "analysis/lib/")
# The product's folders; tests, benchmarks and examples are its users.
PRODUCT = ("allocator/", "analysis/", "cli/", "common/", "format/", "include/",
           "interpose/", "route/", "sim/", "trace/")
SOURCE_EXT = (".c", ".h", ".cpp", ".hpp")
# The APIs the product serves (the CUDA runtime and driver, NCCL, cuBLAS,
# cuDNN, NVML, CUPTI, NVTX, the dynamic linker's dlsym/dlopen, fsdpshim's
# public API): a call to one of these names goes through the API, as the
# program's calls do, wherever it is served; it is no file's dependency.
API_RE = re.compile(r"^(cuda|cu[A-Z]|p?nccl|cublas|cudnn|nvml|cupti|nvtx|dl[a-z]+$|"
                    r"__cuda|fsdpshim_)")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def unit_of(rel):
    return rel


def core_of(rel):
    for c in CORES:
        if rel.startswith(c):
            return c
    return None


def is_product(rel):
    return rel.startswith(PRODUCT) and rel.endswith(SOURCE_EXT)


def load_commands(build, root):
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        sys.exit(f"cycles: {path} is missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)")
    objs, incdirs = [], []
    for e in json.load(open(path)):
        src = os.path.realpath(os.path.join(e["directory"], e["file"]))
        args = e.get("arguments") or e["command"].split()
        out = e.get("output")
        for i, a in enumerate(args):
            if a == "-o" and i + 1 < len(args):
                out = args[i + 1]
            elif a.startswith("-I"):
                d = a[2:] or (args[i + 1] if i + 1 < len(args) else "")
                d = os.path.realpath(os.path.join(e["directory"], d))
                if d.startswith(root + "/") and d not in incdirs:
                    incdirs.append(d)
        if not out:
            continue
        rel = os.path.relpath(src, root)
        if not is_product(rel):
            continue
        obj = os.path.join(e["directory"], out)
        m = re.search(r"CMakeFiles/([^/]+)\.dir/", obj)
        objs.append((rel, obj, m.group(1) if m else obj))
    return objs, incdirs


def nm_symbols(obj):
    """(defined, undefined) global symbol names of one object."""
    res = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"cycles: nm {obj}: {res.stderr.strip()} (is the tree built?)")
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in "uvw":
            defined.add(name)
    return defined, undefined


def call_edges(objs):
    """(from unit, to unit) -> a symbol that makes the edge."""
    info = [(rel, target) + nm_symbols(obj) for rel, obj, target in objs]
    where = defaultdict(list)  # symbol -> [(rel, target)]
    for rel, target, defined, _ in info:
        for s in defined:
            where[s].append((rel, target))
    edges = {}
    for rel, target, _, undefined in info:
        for s in undefined:
            if API_RE.match(s):
                continue
            cands = where.get(s)
            if not cands:
                continue
            same = [r for r, t in cands if t == target]
            if same:
                to = same[0]
            elif len({r for r, _ in cands}) == 1:
                to = cands[0][0]
            else:
                continue  # defined by several targets' objects: not this one's
            a, b = unit_of(rel), unit_of(to)
            if a != b:
                edges.setdefault((a, b), f"calls {s}")
    return edges


def include_edges(root, incdirs):
    edges = {}
    files = []
    for top in PRODUCT:
        for dp, _, names in os.walk(os.path.join(root, top)):
            files += [os.path.join(dp, n) for n in names if n.endswith(SOURCE_EXT)]
    for path in files:
        text = open(path, errors="replace").read()
        for name in INCLUDE_RE.findall(text):
            target = None
            for d in [os.path.dirname(path)] + incdirs:
                cand = os.path.realpath(os.path.join(d, name))
                if os.path.isfile(cand):
                    target = cand
                    break
            if not target:
                continue
            rel, trel = os.path.relpath(path, root), os.path.relpath(target, root)
            if not is_product(trel):
                continue
            a, b = unit_of(rel), unit_of(trel)
            if a != b:
                edges.setdefault((a, b), f"includes {name}")
    return edges


def sccs(nodes, adj):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(adj[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    build = os.path.realpath(args[0])
    baseline = None
    if len(args) == 3 and args[1] == "--check":
        baseline = args[2]
    elif len(args) != 1:
        sys.exit("usage: cycles.py BUILD_DIR [--check BASELINE]")
    objs, incdirs = load_commands(build, root)
    edges = call_edges(objs)
    for k, v in include_edges(root, incdirs).items():
        edges.setdefault(k, v)
    adj = defaultdict(set)
    nodes = set()
    for (a, b) in edges:
        nodes |= {a, b}
        ca = core_of(a)
        if ca and ca == core_of(b):
            continue
        adj[a].add(b)
    cycles = sccs(nodes, adj)
    allowed = []
    if baseline:
        for line in open(baseline):
            line = line.split("#", 1)[0].split()
            if line:
                allowed.append(set(line))
    new, used = [], set()
    for comp in cycles:
        holder = next((i for i, a in enumerate(allowed) if set(comp) <= a), None)
        if holder is None:
            new.append(comp)
        else:
            used.add(holder)
        tag = "NEW " if baseline and holder is None else ""
        print(f"{tag}cycle of {len(comp)}: {' '.join(comp)}")
        members = set(comp)
        for (a, b), why in sorted(edges.items()):
            if a in members and b in members and b in adj[a]:
                print(f"    {a} -> {b}: {why}")
    units = sum(len(c) for c in cycles)
    print(f"cycles: {len(cycles)} cycles over {units} units "
          f"({len(nodes)} units with dependencies; cores exempt: {', '.join(CORES)})")
    if baseline:
        for i, a in enumerate(allowed):
            if i not in used:
                print(f"cycles: baseline line no longer needed: {' '.join(sorted(a))}")
        if new:
            print(f"cycles: {len(new)} cycles not in {baseline}: break them "
                  "(or put the files in their folder's core)", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
