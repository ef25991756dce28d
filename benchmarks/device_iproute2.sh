#!/usr/bin/env bash
# ip and tc on a machine without iproute2 (the lent GPU machine), from Debian packages
# carried in folder $1: unpacked under /tmp/iproute2, never over /, and each tool run by the
# dynamic loader with the packages' libraries, so what `ip netns exec` starts inherits none.
# Usage: source benchmarks/device_iproute2.sh .ipr   (then ip and tc are on PATH)
# Debian puts ip in /bin and a /sbin/ip link to it (absolute, so dangling here): hence find.
root=/tmp/iproute2
mkdir -p "$root/pkg" "$root/bin"
for deb in "$1"/*.deb; do dpkg-deb -x "$deb" "$root/pkg" || return 1; done
libs="$root/pkg/lib/x86_64-linux-gnu:$root/pkg/usr/lib/x86_64-linux-gnu"
for tool in ip tc; do
    binary=$(find "$root/pkg/bin" "$root/pkg/sbin" -name "$tool" -type f | head -n 1)
    printf '#!/bin/sh\nexec /lib64/ld-linux-x86-64.so.2 --library-path %s %s "$@"\n' \
        "$libs" "$binary" >"$root/bin/$tool"
    chmod +x "$root/bin/$tool"
done
export PATH="$root/bin:$PATH"
