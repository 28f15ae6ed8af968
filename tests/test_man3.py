#!/usr/bin/env python3
"""test_man3.py - every public function has a man page that matches it.

Every function declared in include/crs/*.h must be declared in the
SYNOPSIS of exactly one page in man/man3/, with the same prototype (up to
spacing), and named in that page's NAME line (meson installs a link to
the page under each name there, so `man crs_pub_claim` finds crs_pub.3).
A page may declare no function that no header declares. The pages render
without groff warnings (when groff is installed), and man/meson.build
installs each of them.

A new public function therefore needs its prototype in a page's SYNOPSIS
and its name in that page's NAME; the failure says which.

usage: test_man3.py INCLUDE_DIR MAN3_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys

PROTO = re.compile(r"^[\w\s\*]*?\b(crs_\w+)\s*\(")


def normalize(decl):
    decl = re.sub(r"\s+", " ", decl).strip()
    return re.sub(r"\s*([(),*\[\]])\s*", r"\1", decl)


def declarations(text):
    """name -> prototype of the functions declared in C text."""
    found = {}
    for piece in text.split(";"):
        piece = piece.split("{")[-1].split("}")[-1].strip()
        m = PROTO.match(piece)
        if m and not piece.startswith("typedef"):
            found[m.group(1)] = normalize(piece)
    return found


def header_functions(include_dir):
    funcs = {}
    for header in sorted(glob.glob(os.path.join(include_dir, "crs", "*.h"))):
        text = open(header).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
        for name, proto in declarations(text).items():
            funcs[name] = (os.path.relpath(header, os.path.dirname(include_dir)), proto)
    return funcs


def unroff(line):
    for roff, text in (("\\-", "-"), ("\\e", "\\"), ("\\&", ""), ("\\(dq", '"')):
        line = line.replace(roff, text)
    return line


def section(page_text, name):
    m = re.search(rf"^\.SH {name}\n(.*?)(?=^\.SH |\Z)", page_text, flags=re.S | re.M)
    return m.group(1) if m else None


def page_synopsis(text):
    """The function prototypes of a page's SYNOPSIS (text lines and .B
    lines, without #include lines and other requests)."""
    lines = []
    for line in (section(text, "SYNOPSIS") or "").splitlines():
        if line.startswith(".B "):
            line = line[3:].strip().strip('"')
        elif line.startswith("."):
            continue
        line = unroff(line)
        if not line.lstrip().startswith("#"):
            lines.append(line)
    return declarations("\n".join(lines))


def page_names(text):
    name = section(text, "NAME") or ""
    before = unroff(name.replace("\n", " ")).split(" - ")[0]
    return {n.strip() for n in before.split(",") if n.strip()}


def suggest_page(name, pages):
    """The page a new function most likely belongs to: its object's
    (crs_pub_* in crs_pub.3), else the one of the general calls."""
    bases = sorted((os.path.basename(p)[:-2] for p in pages), key=len, reverse=True)
    for base in bases:
        if name.startswith(base + "_"):
            return f"man/man3/{base}.3"
    return "man/man3/crs_strerror.3"


def main():
    include_dir, man3 = sys.argv[1], sys.argv[2]
    funcs = header_functions(include_dir)
    if not funcs:
        sys.exit(f"FAIL: no function found in {include_dir}/crs/*.h")
    failures = []
    documented = {}  # function -> pages declaring it
    pages = sorted(glob.glob(os.path.join(man3, "*.3")))
    for page in pages:
        text = open(page).read()
        rel = os.path.join("man", "man3", os.path.basename(page))
        synopsis = page_synopsis(text)
        names = page_names(text)
        base = os.path.basename(page)[:-2]
        if not synopsis:
            failures.append(f"{rel}: no function prototype in its SYNOPSIS")
        for name, proto in synopsis.items():
            documented.setdefault(name, []).append(rel)
            if name not in funcs:
                failures.append(f"{rel}: SYNOPSIS declares {name}, which no header declares")
            elif proto != funcs[name][1]:
                failures.append(f"{rel}: SYNOPSIS of {name} differs from {funcs[name][0]}:\n"
                                f"    page:   {proto}\n    header: {funcs[name][1]}")
            if name not in names:
                failures.append(f"{rel}: {name} is in the SYNOPSIS but not in the NAME line")
        for name in sorted(names - set(synopsis) - {base}):
            failures.append(f"{rel}: NAME lists {name}, which its SYNOPSIS does not declare")
        if shutil.which("groff"):
            warn = subprocess.run(["groff", "-man", "-ww", "-z", page],
                                  capture_output=True, text=True).stderr.strip()
            if warn:
                failures.append(f"{rel}: groff warns: {warn}")
    listed = open(os.path.join(man3, "..", "meson.build")).read()
    for page in pages:
        if f"'{os.path.basename(page)}'" not in listed:
            failures.append(f"man/man3/{os.path.basename(page)} is not in man3_pages of "
                            "man/meson.build: it would not be installed")
    for name, (header, proto) in sorted(funcs.items()):
        where = documented.get(name, [])
        if not where:
            failures.append(f"{name} ({header}) has no man page: add its prototype to the "
                            f"SYNOPSIS, and its name to the NAME line, of "
                            f"{suggest_page(name, pages)} (or of a new page, listed "
                            f"in man/meson.build)")
        elif len(where) > 1:
            failures.append(f"{name} is declared in several pages: {', '.join(where)}")
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print(f"ok: {len(funcs)} functions, each in one of {len(pages)} pages, "
              "prototypes as in the headers")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
