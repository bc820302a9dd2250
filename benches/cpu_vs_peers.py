#!/usr/bin/env python3
"""headroom cpu next to the stock tools that measure the same kernels.

Runs, interleaved for ROUNDS rounds (default 5), on one core:
  - headroom cpu (SHA-256, AES-256-GCM, ChaCha20-Poly1305, zstd -1/-3 on 2:1 data)
  - openssl speed -elapsed (wall clock, like headroom) for the same ciphers/hash,
    64 KiB messages (headroom's AEAD message size; SHA-256 over 128 KiB records)
  - zstd -b1 -e3 -B131072 on a 16 MiB file of headroom's 2:1 data pattern
    (128 random bytes then 128 zero bytes in every 256), 128 KiB blocks like
    headroom's records
and prints per kernel the median and spread (min..max) of each tool and the
ratio headroom/peer. Expect ~1.0 for SHA-256 (both use SHA-NI) and zstd (both
libzstd); AES-GCM differs when ring and the installed OpenSSL pick different
code paths (ring has VAES/AVX-512 GCM, OpenSSL 3.0 does not).

Usage: python3 benches/cpu_vs_peers.py [ROUNDS]   (builds target/release/headroom,
or runs $HEADROOM as it is when that is set)
The machine should be otherwise idle: wall-clock figures from a shared CPU are
low for every tool (headroom marks such figures with *; see cpu_share in --json).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("ROUNDS", "5"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADROOM = os.environ.get("HEADROOM") or os.path.join(ROOT, "target", "release", "headroom")

# headroom kernel id -> the implementation its document names.
IMPLEMENTATIONS = {}

# kernel key -> (headroom kernel id, data, cache_resident), (peer name)
OPENSSL = {
    "sha256": ("sha256", 131072),
    "aes-256-gcm": ("aes-256-gcm", 65536),
    "chacha20-poly1305": ("chacha20-poly1305", 65536),
}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def headroom_round(data_size):
    out = run([HEADROOM, "cpu", "--json", "--quiet", "--threads", "1", "--time", "1s",
               "--size", data_size,
               "--kernels", "sha256,aes-256-gcm,chacha20-poly1305,zstd-1-compress,zstd-3-compress,"
                            "zstd-1-decompress,zstd-3-decompress"])
    doc = json.loads(out)
    figures = {}
    for p in doc["probes"]:
        s = p["spec"]
        k = s["kernel"]
        IMPLEMENTATIONS[k] = s.get("implementation")
        if k.startswith("zstd"):
            if s.get("data") == "compressible-2to1" and not s.get("cache_resident"):
                figures[k] = p["summary"]["bytes_per_sec"]
        elif s.get("cache_resident"):
            figures[k] = p["summary"]["bytes_per_sec"]
    return figures


def openssl_round():
    figures = {}
    for key, (algo, block) in OPENSSL.items():
        out = run(["openssl", "speed", "-elapsed", "-seconds", "1", "-bytes", str(block), "-evp", algo, "-mr"])
        line = [l for l in out.splitlines() if l.startswith("+F:")][-1]
        figures[key] = float(line.split(":")[-1])  # bytes per second
    return figures


def zstd_round(path):
    out = subprocess.run(["zstd", "-b1", "-e3", "-i1", "-B131072", path], check=True,
                         capture_output=True, text=True)
    text = out.stdout + out.stderr
    figures = {}
    # "... (x1.969),  420.1 MB/s,  2400.5 MB/s 1#" for each level: take the final report of each level.
    for m in re.finditer(r"\(x[\d.]+\),\s+([\d.]+) MB/s,\s+([\d.]+) MB/s\s*(\d)#", text):
        c, d, level = float(m.group(1)), float(m.group(2)), m.group(3)
        if level in ("1", "3"):
            figures[f"zstd-{level}-compress"] = c * 1e6
            figures[f"zstd-{level}-decompress"] = d * 1e6
    return figures


def write_2to1(path, size=16 << 20):
    with open(path, "wb") as f:
        for _ in range(size // 256):
            f.write(os.urandom(128) + bytes(128))


def main():
    if not os.environ.get("HEADROOM"):
        subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "headroom"], cwd=ROOT, check=True)
    have_openssl = shutil.which("openssl") is not None
    have_zstd = shutil.which("zstd") is not None
    ours, peers = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "2to1.bin")
        write_2to1(data)
        for r in range(ROUNDS):
            for k, v in headroom_round("16M").items():
                ours.setdefault(k, []).append(v)
            if have_openssl:
                for k, v in openssl_round().items():
                    peers.setdefault(k, []).append(("openssl speed", v))
            if have_zstd:
                for k, v in zstd_round(data).items():
                    peers.setdefault(k, []).append(("zstd -b", v))
            print(f"round {r + 1}/{ROUNDS} done", file=sys.stderr)

    def fmt(values):
        return f"{statistics.median(values) / 1e6:8.0f} MB/s ({min(values) / 1e6:.0f}..{max(values) / 1e6:.0f})"

    def spread_pct(values):
        m = statistics.median(values)
        return (max(values) - min(values)) / m * 100 if m else 0

    rows = []
    print(f"{'kernel':<20} {'headroom median (min..max)':<32} {'peer':<14} {'peer median (min..max)':<32} ratio")
    for k in sorted(ours):
        if k not in peers:
            continue
        peer_name = peers[k][0][0]
        peer_values = [v for _, v in peers[k]]
        ratio = statistics.median(ours[k]) / statistics.median(peer_values)
        print(f"{k:<20} {fmt(ours[k]):<32} {peer_name:<14} {fmt(peer_values):<32} {ratio:.2f}")
        rows.append((k, ours[k], peer_name, peer_values, ratio))
    for k, mine, peer_name, peer_values, ratio in rows:
        # The line benches/all.sh collects (benches/lib.sh's bench_row), in MB/s.
        print(
            f"BENCHROW|cpu (one core)|{k}|MB/s|{statistics.median(mine) / 1e6:.6g}|{spread_pct(mine):.1f}"
            f"|{peer_name}|{statistics.median(peer_values) / 1e6:.6g}|{spread_pct(peer_values):.1f}|{ratio:.3f}|>= 0.95"
        )
    print(f"implementations: {json.dumps(IMPLEMENTATIONS, sort_keys=True)}")


if __name__ == "__main__":
    main()
