#!/bin/bash
# Boot systemd as PID 1 of a throw-away container on this machine, for the
# test `a_fresh_machine_starts_the_spindown_service` (docs/spindown.md).
# Run by the test inside `unshare --mount --propagation private --uts --ipc`
# so that every mount below is private to it; the root is a tmpfs with the
# host's /usr read-only (merged /usr: /bin, /lib… are links into it), an
# /etc holding only what the boot needs, the unit, its config, and the
# binary under test bound in at the path its ExecStart names.
#
# usage: boot-systemd.sh ROOT UNIT CONFIG BINARY CGROUP DEV MAJOR MINOR
#   ROOT    an empty directory (a tmpfs is mounted on it)
#   UNIT    the service file to install as fallow-spindown.service
#   CONFIG  installed as /etc/fallow/spindown.toml
#   BINARY  the fallow binary, bound in at the same path
#   CGROUP  an empty cgroup v2 directory made for this container: systemd
#           runs in it, in a cgroup namespace, and the test removes it
#   DEV     a block device node to make in the container's /dev (root:disk
#           0660, as udev makes a disk's), MAJOR:MINOR its numbers
set -euo pipefail
R=$1 UNIT=$2 CFG=$3 BIN=$4 CG=$5 DEV=$6 MAJOR=$7 MINOR=$8
mount -t tmpfs -o mode=755 fallow-test-root "$R"
mkdir -p "$R"/{usr,etc/systemd/system,etc/fallow,proc,sys,dev,run,tmp,var,root}
mount --rbind /usr "$R/usr"
mount -o remount,bind,ro "$R/usr"
for d in bin lib lib64 sbin; do
    [ -e "/usr/$d" ] && ln -s "usr/$d" "$R/$d"
done
ln -s ../usr/lib/os-release "$R/etc/os-release"
: >"$R/etc/machine-id"   # empty: systemd makes a transient one
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\ndisk:x:6:\n' >"$R/etc/group"
printf 'passwd: files systemd\ngroup: files systemd\nshadow: files\n' >"$R/etc/nsswitch.conf"
cp "$UNIT" "$R/etc/systemd/system/fallow-spindown.service"
cp "$CFG" "$R/etc/fallow/spindown.toml"
mkdir -p "$R$(dirname "$BIN")"
: >"$R$BIN"
mount --bind "$BIN" "$R$BIN"
# a private /dev: the host's harmless nodes and the disk
mount -t tmpfs -o mode=755,nosuid fallow-test-dev "$R/dev"
for n in null zero full random urandom tty; do
    : >"$R/dev/$n"
    mount --bind "/dev/$n" "$R/dev/$n"
done
mkdir -p "$R/dev/shm" "$R/dev/pts"
mknod -m 0660 "$R$DEV" b "$MAJOR" "$MINOR"
chgrp 6 "$R$DEV"
# into the test's cgroup, then a cgroup namespace rooted there
echo $$ >"$CG/cgroup.procs"
cd "$R"
exec unshare --cgroup --pid --fork --mount-proc --root="$R" --wd=/ \
    env -i container=fallow-test /usr/lib/systemd/systemd --log-target=journal \
    systemd.unit=multi-user.target systemd.wants=fallow-spindown.service
