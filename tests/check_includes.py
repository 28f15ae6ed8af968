#!/usr/bin/env python3
"""check_includes.py - no include or call cycles in the library's sources.

Fails if a file of src/ or ipc/ includes a file that includes it back,
directly or through a chain of other files. It also checks the same at
the level of modules (foo.c and foo.h are module foo): if module A
includes a header of module B, B's files must not include A's header,
so that the parts of the library stay layered. And it checks calls the
same way: if module A calls a function that module B defines, B must
not call (directly or through others) a function of A. Calls are found
by name in the text (comments and strings removed): a function defined
outside a header as static is its file's own; calls through function
pointers (park.h's hooks) are not calls by name and do not count.
Prints every cycle found, as a chain of files or modules.

usage: check_includes.py [SOURCE_ROOT]
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DIRS = ("src", "ipc")


def sources(root):
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(root, d))):
            if name.endswith((".c", ".h")):
                yield os.path.join(d, name)


def resolve(root, path, inc):
    """Where #include "inc" in path leads, as the build's -I flags say:
    the including file's directory, then the root, then include/."""
    for base in (os.path.dirname(path), "", "include"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def include_graph(root):
    graph = {}
    todo = list(sources(root))
    while todo:
        path = todo.pop()
        if path in graph:
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        deps = set()
        for inc in INCLUDE.findall(text):
            dep = resolve(root, path, inc)
            if dep:
                deps.add(dep)
                todo.append(dep)
        graph[path] = deps
    return graph


def cycles(graph):
    """Each strongly connected component with more than one node (or a
    node that reaches itself), as one chain through it."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                found.append(chain(graph, set(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def chain(graph, comp):
    """A path from the component's first node back to itself."""
    start = min(comp)
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in comp and w not in prev:
                prev[w] = v
                todo.append(w)
    return sorted(comp)


def module(path):
    return os.path.splitext(path)[0]


def module_graph(graph):
    mods = {}
    for path, deps in graph.items():
        if not path.startswith(DIRS):
            continue
        m = module(path)
        mods.setdefault(m, set())
        for d in deps:
            if d.startswith(DIRS) and module(d) != m:
                mods[m].add(module(d))
    return mods


# Comments, string and character literals.
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*'
                     r'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
ATTRIBUTE = re.compile(r'__attribute__\s*\(\(.*?\)\)', re.S)
# A definition: a declarator at the start of a line, its parameters, then
# the body's brace (no semicolon between: that would be a prototype).
DEFINITION = re.compile(r'^([A-Za-z_][\w \t\*]*?)\b([A-Za-z_]\w*)'
                        r'\s*\(([^;{}]*?)\)\s*\{', re.M)
CALL = re.compile(r'\b([A-Za-z_]\w*)\s*\(')
# Call cycles known and not yet layered: printed, not failed. A merged
# subscription (src/merge.c, the multipub branch) is a crs_sub that
# sub.c hands each call to, and merge.c drives its member subscriptions
# through sub.c's hooks (sub_announce, sub_withdraw, sub_hangup).
KNOWN_CALL_CYCLES = [{"src/merge", "src/sub"}]
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do",
            "_Static_assert", "_Alignof", "__typeof__", "typeof"}


def code(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        text = f.read()
    text = COMMENT.sub(" ", text)
    return ATTRIBUTE.sub(" ", text)


def call_graph(root):
    """Module -> modules whose functions it calls by name."""
    files = list(sources(root))
    defined = {}  # function name -> module that defines it for others
    texts = {}
    for path in files:
        text = code(root, path)
        texts[path] = text
        for m in DEFINITION.finditer(text):
            head, name = m.group(1), m.group(2)
            if name in KEYWORDS:
                continue
            if "static" in head.split() and not path.endswith(".h"):
                continue  # the file's own
            defined.setdefault(name, module(path))
    mods = {}
    for path, text in texts.items():
        m = module(path)
        mods.setdefault(m, set())
        for name in CALL.findall(text):
            d = defined.get(name)
            if d and d != m:
                mods[m].add(d)
    return mods


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    graph = include_graph(root)
    bad = 0
    for c in cycles(graph):
        print("include cycle: " + " -> ".join(c))
        bad += 1
    for c in cycles(module_graph(graph)):
        print("module cycle: " + " -> ".join(c))
        bad += 1
    for c in cycles(call_graph(root)):
        if set(c) in KNOWN_CALL_CYCLES:
            print("known call cycle (not failed): " + " -> ".join(c))
            continue
        print("call cycle: " + " -> ".join(c))
        bad += 1
    n = sum(1 for p in graph if p.startswith(DIRS))
    print(f"{n} files of {', '.join(DIRS)} checked, {bad} cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
