#!/usr/bin/env bash
# Image.containerd: the archive of `make image` imported as a Kubernetes node imports an image it
# cannot pull, `ctr -n k8s.io images import`, into a containerd of the test's own (its root,
# state and socket in a temp dir; Debian's containerd). Checked: the image is listed under the
# DaemonSet's reference with an OCI manifest, and its layer unpacks (the snapshot exists).
# Usage: containerd_import_test.sh ARCHIVE VERSION
set -euo pipefail
archive=$1 version=$2
for tool in containerd ctr; do
  command -v "$tool" > /dev/null || { echo "containerd_import_test: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
[ -s "$archive" ] || { echo "containerd_import_test: $archive is missing (the Image.build test makes it)" >&2; exit 2; }
work=$(mktemp -d /tmp/polyaccel-containerd.XXXXXX)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/config.toml" <<TOML
version = 2
root = "$work/root"
state = "$work/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/containerd.sock"
TOML
containerd --config "$work/config.toml" > "$work/containerd.log" 2>&1 &
pid=$!
ctr_() { ctr --address "$work/containerd.sock" -n k8s.io "$@"; }
for _ in $(seq 1 50); do
  ctr_ version > /dev/null 2>&1 && break
  sleep 0.2
done
ctr_ images import "$archive"
ref=$(ctr_ images ls -q | grep -v '^sha256:' || true)
echo "imported: $ref"
failures=0
[ "$ref" = "localhost/polyaccel:$version" ] ||
  { echo "FAIL the image is not listed under localhost/polyaccel:<version>"; failures=$((failures + 1)); }
ctr_ images ls | grep 'application/vnd.oci.image.manifest.v1+json' > /dev/null ||
  { echo "FAIL not an OCI manifest"; failures=$((failures + 1)); }
[ -n "$(ctr_ snapshots ls | tail -n +2)" ] || { echo "FAIL no snapshot: the layer did not unpack"; failures=$((failures + 1)); }
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
