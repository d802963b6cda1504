#!/usr/bin/env bash
# Installs what tokenbed needs on a fresh Debian machine, and only what is
# missing: iproute2 (ip, tc: independent read-back of qdiscs), kmod and
# user-mode-linux (real sch_netem where the host kernel lacks it), tshark
# (the Wireshark dissector test), etcd-server and etcd-client (the etcd
# anchor of the FTN lock service), chromium (the results browser's tests,
# driven headless over CDP), then the Go modules. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
command -v modprobe >/dev/null 2>&1 || need+=(kmod)
[ -x /usr/bin/linux.uml ] || need+=(user-mode-linux)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
# etcd (the lock service's anchor, studies/etcdbench): server and etcdctl.
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
# Debian's Chromium: harness/serve's browser tests drive it headless.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# A multi-node Slurm cluster in namespaces (harness/slurmcluster) and the
# Slurm engine (harness run --slurm): Debian's Slurm 22.05 and munge.
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
command -v munged >/dev/null 2>&1 || need+=(munge)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need[*]} and not root; install them or run as root" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture; the answer is no.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

go mod download
