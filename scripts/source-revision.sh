#!/usr/bin/env bash
# The commit a source tree is of, and that commit's time: "<40-hex commit> <seconds since epoch>",
# or "unknown" when neither is known. From git when SRC is the top of a git work tree (not a
# folder inside another checkout: a tarball unpacked under build/ must not take that checkout's
# HEAD); else from scripts/revision.txt, which `git archive` (and `make dist`) fills in
# (.gitattributes: export-subst). CMake (src/CMakeLists.txt, --version), build-image.sh and
# build-deb.sh all ask here, so the binary's commit and the tree's are compared alike.
# Usage: source-revision.sh SRC
set -euo pipefail
src=$(cd "${1:?usage: source-revision.sh SRC}" && pwd -P)
top=$(git -C "$src" rev-parse --show-toplevel 2> /dev/null || true)
if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$src" ]; then
  line=$(git -C "$src" log -1 --format='%H %ct' 2> /dev/null || true)
else
  line=$(head -c 200 "$src/scripts/revision.txt" 2> /dev/null | head -1 || true)
fi
if [[ $line =~ ^[0-9a-f]{40}\ [0-9]{1,12}$ ]]; then
  echo "$line"
else
  echo unknown
fi
