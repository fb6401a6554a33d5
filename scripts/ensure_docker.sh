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
echo "[setup] starting dockerd (log: $log)" >&2
# No iptables and no default bridge: machines like ours have neither; containers run with network none.
setsid nohup dockerd --iptables=false --bridge=none >"$log" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "[setup] dockerd did not answer within 30 s; see $log" >&2
tail -n 20 "$log" >&2 || true
exit 1
