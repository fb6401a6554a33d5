#!/usr/bin/env bash
# Build the local Debian base image NAME (default nextstate/base:bookworm) when it is missing.
# Fast path: pull debian:bookworm-slim where a registry answers. Otherwise debootstrap a minbase
# bookworm from the mirror this machine's apt already uses (never a hard-coded host) and import it.
set -euo pipefail
name=${1:-nextstate/base:bookworm}
if docker image inspect "$name" >/dev/null 2>&1; then exit 0; fi
if timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
  docker tag debian:bookworm-slim "$name"; echo "[images] $name <- debian:bookworm-slim (pulled)" >&2; exit 0
fi
mirror=$(
  { grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}';
    grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } |
  grep -v -e security -e '^\s*$' | grep -i debian | head -n1 || true)
[ -n "$mirror" ] || { echo "[images] no Debian mirror found in apt sources" >&2; exit 1; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
dir=$(mktemp -d /tmp/nextstate-rootfs.XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "[images] debootstrap bookworm from $mirror (a few minutes, once)" >&2
debootstrap --variant=minbase bookworm "$dir" "$mirror" >/tmp/nextstate-debootstrap.log 2>&1 || {
  tail -n 20 /tmp/nextstate-debootstrap.log >&2; exit 1; }
# Keep the image's apt pointed at the same mirror for later layers.
echo "deb $mirror bookworm main" > "$dir/etc/apt/sources.list"
rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
tar -C "$dir" -c . | docker import -c 'CMD ["/bin/bash"]' - "$name" >/dev/null
echo "[images] $name imported" >&2
