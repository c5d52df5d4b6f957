#!/usr/bin/env bash
# Package.tarball: `make dist`'s source tarball, unpacked where there is no .git, builds
# (`make image deb`, the tests left out: -DBUILD_TESTING=OFF; ccache makes the compile quick) and
# the image and the .deb of that tree are checked: the binary and the image name the tarball's
# commit; the image's labels hold no path of this host (no file://) and, with no remote to name,
# no source label; every Debian package whose files the image holds keeps its copyright file, and
# polyaccel has its own in the image and in the .deb (Debian policy 12.5); the image holds Debian's
# CA bundle, every certificate of which OpenSSL reads.
# Usage: tarball_test.sh   (root, network to the Debian archive; exit 77 outside a git checkout)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd -P)
top=$(git -C "$src" rev-parse --show-toplevel 2> /dev/null || true)
if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$src" ]; then
  echo "tarball_test: SKIP: $src is not a git checkout, there is no tarball to make"
  exit 77
fi
for tool in make dpkg-deb openssl python3; do
  command -v "$tool" > /dev/null || { echo "tarball_test: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/polyaccel-tarball-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=tests/deploy/check.sh
. "$here/check.sh"

commit=$(git -C "$src" rev-parse HEAD)
start=$SECONDS
tarball=$(make -s -C "$src" dist BUILD_DIR="$work")
mkdir "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked"
tree=$(echo "$work"/unpacked/polyaccel-*)
[ ! -e "$tree/.git" ] || { echo "tarball_test: the tarball holds .git" >&2; exit 2; }
check "the tarball names its commit (scripts/revision.txt)" grep -q "^$commit [0-9]*$" "$tree/scripts/revision.txt"
echo "info $(basename "$tarball"): $(stat -c %s "$tarball") bytes, made in $((SECONDS - start)) s"

# What the operator runs, timed apart: the build, then the image and the package. IMAGE_SOURCE of
# the caller's environment would hide the default.
for targets in build "image deb"; do
  start=$SECONDS
  # shellcheck disable=SC2086 # (two targets)
  if ! env -u IMAGE_SOURCE CCACHE_BASEDIR="$tree" CCACHE_NOHASHDIR=true \
      make -C "$tree" $targets CMAKE_FLAGS=-DBUILD_TESTING=OFF IMAGE_ARCHIVE="$work/image.tar" \
      > "$work/make.log" 2>&1; then
    echo "FAIL make $targets in the unpacked tarball"
    tail -30 "$work/make.log" | sed 's/^/     /'
    exit 1
  fi
  echo "info make $targets in the unpacked tarball: $((SECONDS - start)) s"
done
deb=$(echo "$tree"/build/polyaccel_*.deb)
check "polyaccel --version names the tarball's commit ${commit:0:12}" \
  sh -c "'$tree/build/src/polyaccel' --version | grep -F 'commit ${commit:0:12}'"

# The image's config and its one layer, from the OCI layout.
mkdir "$work/layout" "$work/layer"
tar -xf "$work/image.tar" -C "$work/layout"
python3 - "$work/layout" "$work/labels.json" "$work/layer.tar.gz" <<'PY'
import json, os, shutil, sys
layout, labels_out, layer_out = sys.argv[1:4]
def blob(digest):
    return os.path.join(layout, "blobs", *digest.split(":"))
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))
labels = dict(config["config"].get("Labels") or {})
labels.update({"manifest:" + k: v for k, v in (manifest.get("annotations") or {}).items()})
json.dump(labels, open(labels_out, "w"), indent=1)
assert len(manifest["layers"]) == 1, manifest["layers"]
shutil.copy(blob(manifest["layers"][0]["digest"]), layer_out)
PY
tar -xzf "$work/layer.tar.gz" -C "$work/layer" 2> /dev/null
check "no label or annotation names a file:// URL or a path of this host" \
  sh -c "cat '$work/labels.json'; ! grep -E 'file:|$work|$src' '$work/labels.json'"
check "no source label: the tree has no remote" \
  python3 -c "import json, sys; l = json.load(open(sys.argv[1])); sys.exit('org.opencontainers.image.source' in l)" "$work/labels.json"
check "the revision label is the tarball's commit" \
  python3 -c "import json, sys; sys.exit(json.load(open(sys.argv[1]))['org.opencontainers.image.revision'] != sys.argv[2])" "$work/labels.json" "$commit"

# Every package whose shared library the image keeps, as this host's dpkg knows them (the image is
# of the same Debian release), and those runtime-packages.sh names.
packages=$({
  "$src/scripts/runtime-packages.sh" "$tree/build/src/polyaccel"
  echo ca-certificates
  find "$work/layer/usr/lib" -name '*.so*' -type f -printf '/usr/lib/%P\n/lib/%P\n' |
    xargs dpkg-query -S 2> /dev/null | sed 's/:.*//' || true
} | sort -u)
missing=()
for p in $packages; do
  [ -f "$work/layer/usr/share/doc/$p/copyright" ] || missing+=("$p")
done
check "the image keeps /usr/share/doc/<package>/copyright of $(echo "$packages" | wc -w) packages ($(echo "$packages" | paste -sd ' ' | cut -c1-60)...)" \
  sh -c "[ -z '${missing[*]}' ] || { echo 'missing: ${missing[*]}'; exit 1; }"
check "the image holds polyaccel's own copyright file" test -s "$work/layer/usr/share/doc/polyaccel/copyright"
check "the image holds no other documentation than copyright files" \
  sh -c "! find '$work/layer/usr/share/doc' -type f ! -name copyright | grep ."
bundle="$work/layer/etc/ssl/certs/ca-certificates.crt"
check "the image holds Debian's CA bundle, 100+ certificates OpenSSL reads" \
  sh -c "n=\$(openssl storeutl -noout -certs '$bundle' | sed -n 's/^Total found: //p'); echo \"\$n certificates\"; [ \"\${n:-0}\" -ge 100 ] && [ \"\$n\" -eq \$(grep -c 'BEGIN CERTIFICATE' '$bundle') ]"
check "the .deb holds /usr/share/doc/polyaccel/copyright" \
  sh -c "dpkg-deb -c '$deb' | grep -E ' \./usr/share/doc/polyaccel/copyright$'"
check "the .deb's README names the commit and no path of this host" \
  sh -c "dpkg-deb --fsys-tarfile '$deb' | tar -xO ./usr/share/doc/polyaccel/README | tee /dev/stderr | grep -q 'Commit: $commit' && ! dpkg-deb --fsys-tarfile '$deb' | tar -xO ./usr/share/doc/polyaccel/README | grep -E 'file:|$work'"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
