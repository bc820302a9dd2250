#!/usr/bin/env bash
# Captures what the lab's real servers (nbdkit, Samba's smbd, tgt's tgtd, nfs-ganesha) say to
# headroom's own clients on loopback, through a small TCP relay that records each
# direction of each connection; the first connection's bytes become the fixtures
# (every connection, numbered in accept order) under crates/proto/tests/frames/ that crates/proto/src/captured_frames.rs decodes.
# Needs root (smbd on a port, tgtd, ganesha) and the lab's servers; run once, by hand,
# when a fixture must be recaptured. Usage: sudo scripts/capture-frames.sh
set -euo pipefail
HEADROOM=${HEADROOM:-target/release/headroom}
OUT=$(cd "$(dirname "$0")/.." && pwd)/crates/proto/tests/frames
WORK=$(mktemp -d /tmp/headroom-capture.XXXXXX)
PIDS=()
cleanup() {
    # tgtd forks a worker that outlives its parent: end the children first (tgtd ignores SIGTERM while it serves a target).
    for p in "${PIDS[@]}"; do kill -KILL $(pgrep -P "$p") "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$OUT"

# relay LISTEN_PORT TARGET_PORT PREFIX: forwards, and writes PREFIX.N.c2s /
# PREFIX.N.s2c per connection (the first 16 KiB of each direction: the
# handshake and the first replies; the rest is the same again).
relay() {
    python3 - "$1" "$2" "$3" <<'PY' &
import socket, sys, threading
listen, target, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
CAP = 16 * 1024
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen)); srv.listen(16)
def pump(src, dst, path):
    kept = 0
    with open(path, "wb") as f:
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                break
            if kept < CAP:
                f.write(b[:CAP - kept]); f.flush(); kept += len(b)
            try:
                dst.sendall(b)
            except OSError:
                break
    for s in (src, dst):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
n = 0
while True:
    c, _ = srv.accept()
    s = socket.create_connection(("127.0.0.1", target))
    for a, b, d in ((c, s, "c2s"), (s, c, "s2c")):
        threading.Thread(target=pump, args=(a, b, f"{prefix}.{n}.{d}"), daemon=True).start()
    n += 1
PY
    PIDS+=($!)
    sleep 0.5
}

wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; exit 1; }

# One short 4 KiB read test: a handshake, a few reads, the teardown.
short_read() {
    "$HEADROOM" disk "$1" --rw read --bs 4k --qd 1 --size 1M --time 300ms --ramp 0s --quiet --no-color "${@:2}" >"$WORK/out.txt" 2>&1 \
        || { cat "$WORK/out.txt" >&2; exit 1; }
}

# ONLY="smb-encrypted nbd ..." recaptures just those (all by default).
want() { [[ -z "${ONLY:-}" || " $ONLY " == *" $1 "* ]]; }

# NBD: nbdkit's memory plugin, 64 MiB, newstyle-fixed.
if want nbd; then
    nbdkit -f -i 127.0.0.1 -p 20809 memory 64M & PIDS+=($!)
    wait_port 20809
    relay 20810 20809 "$WORK/nbd"
    short_read nbd://127.0.0.1:20810/
    for f in "$WORK"/nbd.*.*2*; do cp "$f" "$OUT/nbd-nbdkit.${f#"$WORK/nbd."}"; done
fi

# SMB: smbd on PORT (the relay on PORT+1), a share in /dev/shm, user root with
# password frames-pw; EXTRA lines go into [global]. smb_capture NAME PORT EXTRA.
smb_capture() {
    local name=$1 port=$2 dir="$WORK/$1"
    mkdir -p "$dir"/{private,lock,state,cache,pid,ncalrpc,share}
    cat >"$dir/smb.conf" <<CONF
[global]
  server role = standalone server
  security = user
  passdb backend = tdbsam:$dir/private/passdb.tdb
  private dir = $dir/private
  lock directory = $dir/lock
  state directory = $dir/state
  cache directory = $dir/cache
  pid directory = $dir/pid
  ncalrpc dir = $dir/ncalrpc
  log file = $dir/log
  smb ports = $port
  interfaces = 127.0.0.1/8
  bind interfaces only = yes
  server min protocol = SMB2_10
  disable netbios = yes
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  # Three different limits, so a decoder reading one field for another shows.
  smb2 max trans = 4194304
  smb2 max read = 1048576
  smb2 max write = 2097152
$3
[bench]
  path = $dir/share
  read only = no
  force user = root
CONF
    printf 'frames-pw\nframes-pw\n' | pdbedit -s "$dir/smb.conf" -a -t -u root >/dev/null
    smbd --foreground --no-process-group -s "$dir/smb.conf" & PIDS+=($!)
    wait_port "$port"
    relay $((port + 1)) "$port" "$WORK/$name"
    HEADROOM_SMB_USER=root HEADROOM_SMB_PASSWORD=frames-pw short_read "smb://127.0.0.1:$((port + 1))/bench"
    for f in "$WORK/$name".*.*2*; do cp "$f" "$OUT/$name.${f#"$WORK/$name."}"; done
}
# SMB_PROTOCOL (by default Samba's highest) pins the unencrypted capture's
# dialect: its fixtures were taken at 3.0.2, before headroom offered 3.1.1.
if want smb; then
    smb_capture smb-samba 4450 "  server max protocol = ${SMB_PROTOCOL:-SMB3_02}"
fi
# The same with encryption required and 3.1.1 only: smb/captured_frames.rs
# derives the keys from the password and these bytes and decrypts them.
if want smb-encrypted; then
    smb_capture smb-samba-encrypted 4452 "  server smb encrypt = required
  server min protocol = SMB3_11"
fi

# iSCSI: tgtd on 3270, LUN 1 a 64 MiB file in /dev/shm.
if want iscsi; then
    truncate -s 64M "$WORK/lun"
    tgtd -f --iscsi portal=127.0.0.1:3270 -C 3270 & PIDS+=($!)
    for _ in $(seq 100); do tgtadm -C 3270 --op show --mode target >/dev/null 2>&1 && break; sleep 0.1; done
    IQN=iqn.2026-11.dev.headroom.frames:t
    tgtadm -C 3270 --op new --mode target --tid 1 -T "$IQN"
    tgtadm -C 3270 --op new --mode logicalunit --tid 1 --lun 1 -b "$WORK/lun"
    tgtadm -C 3270 --op bind --mode target --tid 1 -I ALL
    relay 3271 3270 "$WORK/iscsi"
    short_read "iscsi://127.0.0.1:3271/$IQN/1"
    for f in "$WORK"/iscsi.*.*2*; do cp "$f" "$OUT/iscsi-tgt.${f#"$WORK/iscsi."}"; done
    tgtadm -C 3270 --op delete --mode system --force >/dev/null 2>&1 || true
    rm -f /var/run/tgtd/socket.3270 /var/run/tgtd/socket.3270.lock
fi

# NFS: nfs-ganesha (VFS backend), NFSv4 only on 20490 (one port: no
# portmapper, no MOUNT), in a mount namespace with a private /run as the lab
# runs it. The session is crates/proto/tests/nfs_replay.rs's own (open the
# share, write 4 KiB, read it back, remove the file), which that test replays.
if want nfs; then
    mkdir -p "$WORK/nfs-export" "$WORK/nfs-recovery"
    cat >"$WORK/ganesha.conf" <<CONF
NFS_CORE_PARAM { Protocols = 4; NFS_Port = 20490; Bind_addr = 127.0.0.1; Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false; }
NFSV4 { Graceless = true; RecoveryBackend = fs; RecoveryRoot = "$WORK/nfs-recovery"; }
EXPORT { Export_Id = 1; Path = "$WORK/nfs-export"; Pseudo = "/export"; Access_Type = RW; Squash = No_Root_Squash;
         SecType = sys; Protocols = 4; Transports = TCP; FSAL { Name = VFS; } }
CONF
    unshare --mount --propagation private sh -c 'mount -t tmpfs -o mode=755 headroom-capture-run /run && exec ganesha.nfsd -F -f "$1" -L "$2" -p "$3" -N NIV_EVENT' \
        ganesha "$WORK/ganesha.conf" "$WORK/ganesha.log" "$WORK/ganesha.pid" & PIDS+=($!)
    wait_port 20490
    relay 20491 20490 "$WORK/nfs"
    NFS_CAPTURE_TARGET="nfs://127.0.0.1:20491/export?version=4" \
        cargo test --release -p headroom-proto --test nfs_replay -- --ignored --exact capture_session >"$WORK/out.txt" 2>&1 \
        || { cat "$WORK/out.txt" >&2; exit 1; }
    sleep 0.5
    for f in "$WORK"/nfs.*.*2*; do cp "$f" "$OUT/nfs-ganesha.${f#"$WORK/nfs."}"; done
fi
ls -l "$OUT"
