#!/usr/bin/env python3
"""check_src_readme.py - src/README.md names every file of src/ and ipc/,
and no file that is gone, so the map of the library stays true as files
move. Prints each file missing from it and each name it has too many.

usage: check_src_readme.py [SOURCE_ROOT]
"""
import os
import re
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    text = open(os.path.join(root, "src", "README.md")).read()
    named = set()
    for name in re.findall(r"`((?:ipc/)?[A-Za-z0-9_.-]+\.(?:c|h|map))`", text):
        named.add(name if name.startswith("ipc/") else "src/" + name)
    files = {d + "/" + f for d in ("src", "ipc")
             for f in os.listdir(os.path.join(root, d))
             if f.endswith((".c", ".h", ".map"))}
    for f in sorted(files - named):
        print(f"src/README.md does not describe {f}")
    for f in sorted(named - files):
        print(f"src/README.md describes {f}, which does not exist")
    return 1 if files != named else 0


if __name__ == "__main__":
    sys.exit(main())
