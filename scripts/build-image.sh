#!/usr/bin/env bash
# `make image`: an OCI image of polyaccel made from Debian 12's packages, pulling from no
# registry. mmdebstrap extracts the runtime packages (scripts/runtime-packages.sh) into a root,
# `cmake --install` adds the binary, its completion and man pages, everything the binary cannot
# load is removed (no shell, no package manager, no other program), and umoci writes the image,
# which is archived as an OCI layout that `podman load` and `ctr -n k8s.io images import` take.
# Usage: build-image.sh BUILD_DIR OUTPUT.tar
# Environment: IMAGE_NAME (default localhost/polyaccel: built here, pulled from no registry; the
#   name deploy/kubernetes/base sets), IMAGE_SOURCE (org.opencontainers.image.source; default the
#   git remote "origin" when it is a network URL, without credentials; else no such label: never a
#   path of the build host), SOURCE_DATE_EPOCH (the image's dates; default the commit's time).
# Works in a tree without .git: the commit then comes from a tarball of `make dist`/`git archive`
# (scripts/source-revision.sh).
set -euo pipefail
# A step that fails names itself: mmdebstrap --quiet and umoci can fail without a word (an
# Image.build in CI once failed after 46 s with no output).
trap 'echo "build-image: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
build=${1:?usage: build-image.sh BUILD_DIR OUTPUT.tar}
output=${2:?usage: build-image.sh BUILD_DIR OUTPUT.tar}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
binary="$build/src/polyaccel"
[ -x "$binary" ] || { echo "build-image: $binary is missing (make build)" >&2; exit 2; }
for tool in mmdebstrap umoci ldconfig python3; do
  command -v "$tool" > /dev/null || { echo "build-image: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "build-image: run as root (mmdebstrap and umoci keep file owners)" >&2; exit 2; }

version=$("$binary" --version | awk '{print $2}')
# The binary names the commit it was configured at; an image or package of a stale build would
# carry a revision its binary does not have.
built=$("$binary" --version | sed -n 's/.*commit \([0-9a-z]*\).*/\1/p')
read -r revision commit_time <<< "$("$here/source-revision.sh" "$src")"
[ "$built" = "${revision:0:12}" ] || { echo "build-image: $binary is of commit ${built:-(none)}, the tree is at ${revision:0:12}: make build first" >&2; exit 2; }
[ "$revision" != unknown ] || revision=  # a copy without .git and not of `make dist`: no label
name=${IMAGE_NAME:-localhost/polyaccel}
# Where the source is, for a reader of the image: a URL anyone can open, not this host's folder.
source_url=${IMAGE_SOURCE-$("$here/source-url.sh" "$src")}
epoch=${SOURCE_DATE_EPOCH:-${commit_time:-$(date +%s)}}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
export SOURCE_DATE_EPOCH=$epoch

work=$(mktemp -d /tmp/polyaccel-image.XXXXXX)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
root="$work/root"

# 1. The runtime packages and what they depend on, extracted (not installed: no dpkg, no
#    maintainer scripts, no shell needed in the root). The archive is the host's own apt source.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || { echo "build-image: no apt source in /etc/apt" >&2; exit 2; }
# And in the image only: Debian's ROCm SMI, which the agent loads on AMD nodes (a newer ROCm of the
# host can be mounted instead; docs/install.md). NVML comes with NVIDIA's container runtime or a
# mount of the driver; HLML is not in Debian.
packages=$({ "$here/runtime-packages.sh" "$binary"; echo librocm-smi64-1; } | paste -sd, -)
mmdebstrap --quiet --variant=extract --format=directory --include="$packages" --skip=cleanup/apt/lists \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
  bookworm "$root" "${sources[@]}"

# Of /usr/share/doc only the copyright files (the packages' licenses, which their terms want
# shipped with the binaries) and Debian's links from one package's folder to its source's
# (libstdc++6 -> gcc-12-base).
find "$root/usr/share/doc" -mindepth 2 ! -type d ! -name copyright -delete
find "$root/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
# Debian's CA bundle (ca-certificates): the agent's only TLS client, the API-server client of the
# DRA driver (src/kube_api/client.cc), trusts the cluster's CA alone when the service account or
# the kubeconfig names one; a kubeconfig without one (an API server with a publicly signed
# certificate) leaves it to libcurl's default, /etc/ssl/certs/ca-certificates.crt. Only the
# package's certificates and copyright, not what it depends on (openssl, debconf and Perl): the
# bundle as its postinst's update-ca-certificates writes it, each certificate in name order.
ca="$work/ca-certificates"
mkdir -p "$ca"
(cd "$ca" && apt-get -q -o Dir="$root" -o Dir::State::Status="$root/var/lib/dpkg/status" \
  -o APT::Sandbox::User=root download ca-certificates > /dev/null)
dpkg-deb --fsys-tarfile "$ca"/ca-certificates_*.deb |
  tar -x -C "$ca" ./usr/share/ca-certificates ./usr/share/doc/ca-certificates/copyright
install -D -m 0644 "$ca/usr/share/doc/ca-certificates/copyright" "$root/usr/share/doc/ca-certificates/copyright"
mkdir -p "$root/etc/ssl/certs"
find "$ca/usr/share/ca-certificates" -name '*.crt' -print0 | LC_ALL=C sort -z |
  xargs -0 cat > "$root/etc/ssl/certs/ca-certificates.crt"
grep -q 'BEGIN CERTIFICATE' "$root/etc/ssl/certs/ca-certificates.crt" ||
  { echo "build-image: the CA bundle is empty" >&2; exit 2; }

# 2. polyaccel itself, where the package puts it; the systemd units are for hosts, not the image.
DESTDIR="$root" cmake --install "$build" --prefix /usr --strip > /dev/null
rm -rf "$root/usr/lib/systemd"
install -D -m 0644 "$src/deploy/debian/copyright" "$root/usr/share/doc/polyaccel/copyright"

# 3. Only what the binary can load: the shared libraries it needs and those it dlopens (libcurl,
#    ROCm SMI, and their own needs), found by the root's dynamic loader; every other library and every
#    program of the extracted packages goes. ldconfig -r writes the root's loader cache first,
#    since nothing was installed there.
ldconfig -r "$root"
loader=/lib64/ld-linux-x86-64.so.2
dlopened=()
for soname in libcurl.so.4 librocm_smi64.so.1; do
  # awk reads the whole list: an early exit would kill ldconfig with SIGPIPE, a failure under
  # pipefail (CI saw exit 141 here).
  path=$(ldconfig -r "$root" -p | awk -v s="$soname" '$1 == s && /x86-64/ && !p {print $NF; p = 1}')
  [ -n "$path" ] || { echo "build-image: $soname is not in the root" >&2; exit 2; }
  dlopened+=("$path")
done
for object in /usr/bin/polyaccel "${dlopened[@]}"; do
  echo "$object"
  chroot "$root" "$loader" --list "$object" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}'
done | python3 -c '
import os, sys
root = sys.argv[1]
def inside(path):  # the real path of path in root, links resolved as the root sees them
    parts, done, hops = path.strip("/").split("/"), "", 0
    while parts:
        part = parts.pop(0)
        full = root + done + "/" + part
        if os.path.islink(full) and hops < 40:
            hops += 1
            target = os.readlink(full)
            parts = target.strip("/").split("/") + parts
            if target.startswith("/"): done = ""
        elif part == "..": done = done.rsplit("/", 1)[0]
        elif part not in ("", "."): done += "/" + part
    return done
keep = {inside(line.strip()) for line in sys.stdin if line.strip()}
keep.add(inside("/lib64/ld-linux-x86-64.so.2"))
for d, _, files in os.walk(root):
    for f in files:
        if ".so" in f and (f.endswith(".so") or ".so." in f):
            path = os.path.join(d, f)
            if inside(path[len(root):]) not in keep: os.unlink(path)
' "$root"
# No program but polyaccel and its static CDI hook (which the agent installs on the host), no
# package manager state, nothing a runtime mounts itself.
for d in bin sbin usr/sbin usr/libexec usr/share/gdb usr/share/gcc usr/lib/x86_64-linux-gnu/gconv \
  usr/lib/x86_64-linux-gnu/engines-3 usr/lib/x86_64-linux-gnu/ossl-modules var/cache var/lib/apt \
  var/lib/dpkg var/log etc/apt etc/dpkg; do
  rm -rf "${root:?}/$d"
done
find "$root/usr/bin" "$root/dev" -mindepth 1 ! -name polyaccel ! -name polyaccel-cdi-hook \
  -exec rm -rf {} +
rm -f "$root/etc/fstab" "$root/etc/hostname" "$root/etc/resolv.conf"
ldconfig -r "$root"  # the cache again, over what is left
# The binary must still start in its root, and what it dlopens load there.
chroot "$root" /usr/bin/polyaccel --version > /dev/null ||
  { echo "build-image: polyaccel does not start in the image's root" >&2; exit 2; }
# The hook runs on the node with the node's root: it must need nothing, not even a loader.
hook_root="$work/hook-root"
install -D -m 0755 "$root/usr/bin/polyaccel-cdi-hook" "$hook_root/polyaccel-cdi-hook"
chroot "$hook_root" /polyaccel-cdi-hook version > /dev/null ||
  { echo "build-image: polyaccel-cdi-hook does not run in an empty root (not static?)" >&2; exit 2; }
rm -rf "$hook_root"
for object in "${dlopened[@]}"; do
  chroot "$root" "$loader" --list "$object" | grep "not found" > /dev/null &&
    { echo "build-image: $object cannot be loaded in the image's root" >&2; exit 2; }
done
find "$root" -newermt "@$epoch" -exec touch --no-dereference -d "@$epoch" {} + 2> /dev/null || true

# 4. The image: one layer, the entrypoint, the annotations (version, revision, source).
layout="$work/layout"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci insert --rootless=false --image "$layout:$version" --history.created "$created" \
  --history.created_by "scripts/build-image.sh" "$root" / > /dev/null
annotations=(
  "org.opencontainers.image.title=polyaccel"
  "org.opencontainers.image.description=polyaccel node agent: device plugin, DRA driver, exporter"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.created=$created"
  "org.opencontainers.image.base.name=debian:bookworm (packages, extracted)"
)
[ -z "$revision" ] || annotations+=("org.opencontainers.image.revision=$revision")
[ -z "$source_url" ] || annotations+=("org.opencontainers.image.source=$source_url")
config_args=(--image "$layout:$version" --created "$created" --author polyaccel
  --config.entrypoint /usr/bin/polyaccel --config.cmd agent
  --config.env PATH=/usr/bin
  # NVIDIA's container runtime (and the legacy device plugin) put NVML where the loader finds
  # it only after their ldcache hook runs; this finds it either way.
  --config.env LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu
  --config.exposedports 9477/tcp --history.created "$created" --history.created_by "polyaccel config")
for a in "${annotations[@]}"; do
  config_args+=(--config.label "$a" --manifest.annotation "$a")
done
umoci config "${config_args[@]}"
umoci gc --layout "$layout"
# The index names the image for both loaders: podman reads org.opencontainers.image.ref.name,
# containerd's import io.containerd.image.name.
python3 - "$layout/index.json" "$name:$version" "$version" <<'PY'
import json, sys
path, full, tag = sys.argv[1:4]
index = json.load(open(path))
for m in index["manifests"]:
    if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
        m["annotations"]["org.opencontainers.image.ref.name"] = full
        m["annotations"]["io.containerd.image.name"] = full
json.dump(index, open(path, "w"), separators=(",", ":"))
PY
mkdir -p "$(dirname "$output")"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$output.tmp" .
mv "$output.tmp" "$output"
uncompressed=$(du -sb "$root" | cut -f1)
compressed=$(stat -c %s "$output")
echo "build-image: $output: $name:$version (revision ${revision:0:12}${source_url:+, source $source_url}), root $((uncompressed / 1024 / 1024)) MiB, archive (gzip layers) $((compressed / 1024 / 1024)) MiB"
