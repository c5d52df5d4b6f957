#!/usr/bin/env python3
"""Packs files of a real sysfs/procfs tree into one seed of the FuzzTree format (fuzz_support.h):
records separated by NUL bytes, "relative/path\\ncontent" for a file, "relative/dir/" for an empty directory, "relative/path -> target"
for a symbolic link. Directories named are packed whole; links are kept, not followed.

  pack_tree.py ROOT OUT PATH...   (PATHs relative to ROOT, shell globs allowed)
"""
import glob
import os
import sys


def records(root, relative):
    path = os.path.join(root, relative)
    if os.path.islink(path):
        yield f"{relative} -> {os.readlink(path)}".encode()
    elif os.path.isdir(path):
        if not os.listdir(path):
            yield f"{relative}/".encode()
        for name in sorted(os.listdir(path)):
            yield from records(root, os.path.join(relative, name))
    elif os.path.isfile(path):
        with open(path, "rb") as f:
            yield relative.encode() + b"\n" + f.read(4096)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    packed = []
    for pattern in sys.argv[3:]:
        matches = sorted(glob.glob(os.path.join(root, pattern))) or [os.path.join(root, pattern)]
        for m in matches:
            packed.extend(records(root, os.path.relpath(m, root)))
    with open(out, "wb") as f:
        f.write(b"\0".join(packed))


if __name__ == "__main__":
    main()
