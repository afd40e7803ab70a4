#!/usr/bin/env bash
# Checks the README's two commands on a fresh Debian 12 root file system, as a new user's machine:
# debootstrap (minbase + git) into DIR, clone this repository's HEAD into it, then inside a chroot
# run scripts/run.sh and scripts/test.sh, each timed. Needs root, debootstrap and the apt mirror.
#   scripts/check-fresh-debian.sh /var/tmp/bookworm        # creates DIR when it does not exist
# Prints both wall times; exits non-zero when either command fails. Leaves DIR for inspection
# (remove it with: umount DIR/proc DIR/dev/pts DIR/dev 2>/dev/null; rm -rf DIR).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:?usage: $0 DIR}"
mirror="${MOEPERF_MIRROR:-http://deb.debian.org/debian}"
if [ ! -x "$dir/usr/bin/git" ]; then
  debootstrap --variant=minbase --include=git,ca-certificates bookworm "$dir" "$mirror"
fi
cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
mountpoint -q "$dir/dev" || mount --bind /dev "$dir/dev"
mountpoint -q "$dir/dev/pts" || mount --bind /dev/pts "$dir/dev/pts"
rm -rf "$dir/root/moeperf"
git clone -q "$root" "$dir/root/moeperf"
inside() { chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 bash -c "cd /root/moeperf && $1"; }
t0=$(date +%s)
inside "./scripts/run.sh" >"$dir/root/run.log" 2>&1 || { tail -40 "$dir/root/run.log"; echo "run.sh FAILED" >&2; exit 1; }
t1=$(date +%s)
inside "./scripts/test.sh" >"$dir/root/test.log" 2>&1 || { tail -60 "$dir/root/test.log"; echo "test.sh FAILED" >&2; exit 1; }
t2=$(date +%s)
grep -E "^--   |tests passed|tests failed" "$dir/root/test.log" || true
echo "fresh Debian 12 root: scripts/run.sh $((t1 - t0)) s, then scripts/test.sh $((t2 - t1)) s (logs: $dir/root/run.log, $dir/root/test.log)"
