#!/usr/bin/env bash
# The Debian packages polyaccel needs at run time, as dpkg-shlibdeps finds them from the binary's
# own NEEDED entries, plus the libraries it loads itself with dlopen (kDlopenedPackages below) and
# the data it reads. One list for the image (scripts/build-image.sh) and the package
# (scripts/build-deb.sh), so the two never disagree.
# Usage: runtime-packages.sh BINARY [--versioned]
#   prints one package a line; --versioned prints dpkg-shlibdeps' Depends field instead
#   ("libc6 (>= 2.34), ..."), the form a .deb's control file takes.
set -euo pipefail
binary=${1:?usage: runtime-packages.sh BINARY [--versioned]}
[ -f "$binary" ] || { echo "runtime-packages: $binary: no such file" >&2; exit 2; }
binary=$(realpath "$binary")

# Loaded with dlopen, so dpkg-shlibdeps cannot see them: libcurl (the DRA driver's API-server
# client, src/kube_api/client.cc), by soname; its package is the one of the build machine's release
# that holds it (Debian 12's libcurl4, 13's libcurl4t64), found with its loader cache and dpkg. The
# vendors' libraries (NVML, ROCm SMI, HLML) are not listed: the driver on the host provides them
# (docs/install.md).
dlopened_sonames=(libcurl.so.4)
dlopened=()
for soname in "${dlopened_sonames[@]}"; do
  # awk reads the whole list: an early exit would kill ldconfig with SIGPIPE (pipefail).
  path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ && !p {print $NF; p = 1}')
  [ -n "$path" ] || { echo "runtime-packages: $soname is not installed (its -dev package: scripts/install-deps.sh)" >&2; exit 2; }
  package=$(dpkg-query -S "$path" "$(realpath "$path")" 2> /dev/null | sed -n '1s/:.*//p' || true)
  [ -n "$package" ] || { echo "runtime-packages: no package holds $path" >&2; exit 2; }
  dlopened+=("$package")
done
# Read at run time: PCI vendor and device names (src/discover/pci_ids.cc).
data=(pci.ids)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debian"
printf 'Source: polyaccel\n\nPackage: polyaccel\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O -e "$binary" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "runtime-packages: dpkg-shlibdeps found no dependency of $binary" >&2; exit 2; }

if [ "${2:-}" = --versioned ]; then
  extra=$(printf ', %s' "${dlopened[@]}" "${data[@]}")
  echo "$depends$extra"
else
  { echo "$depends" | tr ',' '\n' | sed 's/(.*//; s/ //g' | grep -v '^$'
    printf '%s\n' "${dlopened[@]}" "${data[@]}"; } | sort -u
fi
