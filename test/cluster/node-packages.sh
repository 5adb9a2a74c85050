#!/usr/bin/env bash
# Installs, from Debian's packages, what the test stack's real node needs and is not built from the
# Go module proxy: the network tools (nft, iptables, conntrack, ip), libseccomp's headers and library
# (build.sh builds runc with them), and the python3 and sh the engine stand-in's image carries
# (mdplane's engine Pods run python3 scripts on the engine's image). Does nothing when all are there;
# otherwise it needs root and apt-get, and fails with one line naming what is still missing.
set -euo pipefail

declare -A provides=(
  [/usr/include/seccomp.h]=libseccomp-dev [pkg-config]=pkg-config [gcc]=gcc
  [nft]=nftables [iptables]=iptables [conntrack]=conntrack [ip]=iproute2 [ldd]=libc-bin
  [/usr/bin/python3.11]=python3.11 [/usr/lib/python3.11/urllib/request.py]=libpython3.11-stdlib [/usr/bin/dash]=dash
)

missing() {
  local want
  for want in "${!provides[@]}"; do
    if [[ $want == /* ]]; then [ -e "$want" ] || echo "${provides[$want]}"; else command -v "$want" >/dev/null || echo "${provides[$want]}"; fi
  done | sort -u
}

packages=$(missing)
[ -n "$packages" ] || exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "the real node needs Debian's packages" $packages "(run test/cluster/node-packages.sh as root on Debian)" >&2
  exit 1
fi
echo "installing" $packages "from Debian's packages ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086 # one word per package
apt-get install -y -qq --no-install-recommends $packages >/dev/null
still=$(missing)
if [ -n "$still" ]; then
  echo "the real node still lacks Debian's packages" $still "after apt-get install" >&2
  exit 1
fi
