#!/usr/bin/env bash
# Where a reader finds the source of SRC: its git remote "origin" as an https URL (an scp-like
# git@host:path becomes https://host/path; user names and tokens are dropped), or nothing when
# there is no remote or it is a path on this host (a clone of a local folder): an image or
# package must not name a folder of the machine that built it.
# Usage: source-url.sh SRC   (prints the URL, or nothing)
set -euo pipefail
src=$(cd "${1:?usage: source-url.sh SRC}" && pwd -P)
top=$(git -C "$src" rev-parse --show-toplevel 2> /dev/null || true)
url=
# Only SRC's own checkout, not one it was unpacked into (as scripts/source-revision.sh).
[ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$src" ] || url=$(git -C "$src" remote get-url origin 2> /dev/null || true)
case $url in
  https://* | http://* | ssh://* | git://*)
    scheme=${url%%://*} rest=${url#*://}
    host=${rest%%/*} path=${rest#"$host"}
    host=${host##*@}  # no user name or token
    if [ "$scheme" != http ]; then
      scheme=https
      host=${host%%:*}  # ssh's port is not the web's
    fi
    echo "$scheme://$host$path" ;;
  *@*:*) # scp-like: git@github.com:owner/repo.git
    rest=${url#*@}
    echo "https://${rest%%:*}/${rest#*:}" ;;
  *) ;;  # none, a local path or file://: no URL
esac
