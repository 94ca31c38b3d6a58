#!/usr/bin/env bash
# Source this on the GPU machine (no iproute2 there) before a --shaped run:
#
#   source scripts/gpu_netns_tools.sh [DEB_FOLDER]     # default .gpu-tools/iproute2-debs
#
# Unpacks the carried Debian iproute2 packages under /tmp/ipr (never into /)
# and puts `ip` and `tc` wrappers first on PATH. The unpacked libraries are
# seen by ip and tc only: `ip netns exec NS CMD` runs CMD with the caller's
# own LD_LIBRARY_PATH, so Python and CUDA inside a namespace load what they
# load outside it.
DEBS="${1:-.gpu-tools/iproute2-debs}"
IPR=/tmp/ipr
if [ ! -x "$IPR/bin/ip" ]; then
  mkdir -p "$IPR"
  for f in "$DEBS"/*.deb; do dpkg -x "$f" "$IPR"; done
fi
IPR_LIBS="$IPR/lib/x86_64-linux-gnu:$IPR/usr/lib/x86_64-linux-gnu"
mkdir -p "$IPR/wrap"
cat >"$IPR/wrap/ip" <<WRAP
#!/bin/sh
if [ "\$1" = netns ] && [ "\$2" = exec ]; then
  ns="\$3"; shift 3
  exec env LD_LIBRARY_PATH="$IPR_LIBS" "$IPR/bin/ip" netns exec "\$ns" env LD_LIBRARY_PATH="\${LD_LIBRARY_PATH-}" "\$@"
fi
LD_LIBRARY_PATH="$IPR_LIBS" exec "$IPR/bin/ip" "\$@"
WRAP
cat >"$IPR/wrap/tc" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$IPR_LIBS" exec "$IPR/sbin/tc" "\$@"
WRAP
chmod +x "$IPR/wrap/ip" "$IPR/wrap/tc"
export PATH="$IPR/wrap:$PATH"
ip -V && tc -V
