#!/usr/bin/env bash
# Make sure a Docker engine answers: install docker.io if missing, start dockerd if no daemon runs.
# Idempotent; safe to call before every make target.
set -euo pipefail
log=${DOCKERD_LOG:-/var/log/nextstate-dockerd.log}
if ! command -v dockerd >/dev/null 2>&1; then
  echo "[setup] installing docker.io" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null; }
fi
if docker info >/dev/null 2>&1; then exit 0; fi

# A data root on btrfs (a loop file, sparse: it takes what the images and containers take): there the
# daemon can refuse a container's write past its disk ceiling (`--storage-opt size=`, a btrfs qgroup
# limit; envs/sandbox/quota.py). overlay2 on ext4 has no quota and leaves the disk watch alone.
# Opt in with NEXTSTATE_DOCKER_BTRFS=1 (image builds get several times slower, container starts and
# removals ~0.1 s: envs/sandbox/quota.py); any step that fails falls back to Docker's default.
btrfs_root() {
  local root=${NEXTSTATE_DOCKER_ROOT:-/var/lib/nextstate-docker} img
  img=$root.btrfs
  grep -qw btrfs /proc/filesystems || return 1
  if ! command -v mkfs.btrfs >/dev/null 2>&1; then
    echo "[setup] installing btrfs-progs" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q btrfs-progs >/dev/null 2>&1 || return 1
  fi
  if ! mountpoint -q "$root"; then
    if [ ! -s "$img" ]; then  # 80% of the free space unless told, allocated as it is used
      local free_kb size
      free_kb=$(df -Pk "$(dirname "$img")" | awk 'NR==2 {print $4}')
      size=${NEXTSTATE_DOCKER_BTRFS_SIZE:-$((free_kb * 8 / 10))K}
      truncate -s "$size" "$img" && mkfs.btrfs -q "$img" >/dev/null || { rm -f "$img"; return 1; }
    fi
    mkdir -p "$root" && mount -o loop "$img" "$root" || return 1
  fi
  btrfs quota enable "$root" >/dev/null 2>&1 || return 1
  echo "--storage-driver=btrfs --data-root=$root"
}
args=""
if [ "${NEXTSTATE_DOCKER_BTRFS:-0}" = 1 ]; then
  args=$(btrfs_root) || { args=""; echo "[setup] no btrfs data root: disk ceilings off, the disk watch holds alone" >&2; }
fi
if [ -n "${DOCKER_HOST:-}" ]; then  # a second daemon beside the default one (the tests start one on btrfs)
  state=${NEXTSTATE_DOCKER_ROOT:-/var/lib/nextstate-docker}
  args="$args -H $DOCKER_HOST --exec-root=$state.exec --pidfile=$state.pid"
fi
echo "[setup] starting dockerd $args (log: $log)" >&2
# No iptables and no default bridge: machines like ours have neither; containers run with network none.
# shellcheck disable=SC2086
setsid nohup dockerd --iptables=false --bridge=none $args >"$log" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "[setup] dockerd did not answer within 30 s; see $log" >&2
tail -n 20 "$log" >&2 || true
exit 1
