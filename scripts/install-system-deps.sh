#!/usr/bin/env bash
# Installs the Debian packages the tests need: a software WebGPU adapter for Node (Mesa 25 lavapipe
# from bookworm-backports; Debian 12's stock Mesa 22 is rejected by Dawn) and chromium for the
# end-to-end tests (its bundled SwiftShader is also a second Vulkan adapter for Node), and Python 3 with
# torch (python3-torch) for the tests that run the trainers' dump hooks on synthetic tensors.
# The backports suite is added by copying the machine's own Debian apt source entry with the suite
# changed, so no host name is written here. Idempotent; needs root (or sudo).
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

have_backports() { grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; }
if ! have_backports; then
  src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ]; then
    # deb822: take the first stanza (the main archive) and swap its suites for bookworm-backports.
    awk 'BEGIN{RS="";ORS="\n\n"} NR==1{print}' "$src" \
      | sed -E 's/^Suites:.*/Suites: bookworm-backports/' | $SUDO tee /etc/apt/sources.list.d/backports.sources >/dev/null
  else
    grep -E '^deb .* bookworm ' /etc/apt/sources.list | head -1 \
      | sed -E 's/ bookworm / bookworm-backports /' | $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  fi
fi
need=0
dpkg -s chromium >/dev/null 2>&1 || need=1
dpkg -s python3-torch >/dev/null 2>&1 || need=1
dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^2[5-9]' || need=1
if [ "$need" = 1 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
  $SUDO apt-get install -y -qq chromium fonts-dejavu-core python3-torch python3-numpy >/dev/null
fi
echo "system deps: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers), chromium $(dpkg-query -W -f='${Version}' chromium), python3-torch $(dpkg-query -W -f='${Version}' python3-torch)"
