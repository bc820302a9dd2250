#!/usr/bin/env bash
# headroom's network engine against the stock tools, side by side on loopback,
# interleaved (A B A B ...), medians and ratios headroom/peer:
#   1 TCP stream      headroom net up1   vs iperf3 -c        throughput (>= 1.0) and CPU s/GB of both ends (<= 1.0)
#   the same with --skip-rx-copy (the receiver drops the bytes in the kernel,
#   as iperf3 3.19's --skip-rx-copy; Debian 12's iperf3 3.12 has no such mode,
#   so its row is headroom's lighter receiver against iperf3's copying one: labelled so)
#   the same with --zerocopy against iperf3 -Z (both senders send by reference: sendfile),
#   and with --zerocopy --skip-rx-copy against iperf3 -Z (whose receiver still copies: labelled so),
#   these with each tool's two ends pinned to two CPUs (server on one, client on the other) and
#   both tools' copying stream placed the same way beside them: on one CPU, or left to the
#   scheduler, sending by reference is bimodal and loses (10-14 Gb/s against 18-23 copying, both
#   tools); on two it wins (26-44 against 16-20), as towards another machine
#   4 TCP streams     headroom net up x4 vs iperf -c -P 4    throughput (>= 1.0; iperf2 is multi-threaded),
#                     and headroom --zerocopy x4, and headroom --skip-rx-copy x4, against the same
#                     (iperf2 has neither mode: labelled so)
#   request/response  headroom net rtt   vs sockperf ping-pong, 64-byte messages, median RTT (sockperf prints RTT/2: doubled)
#   RR, pinned        the same, both tools' ends pinned (taskset) to one CPU, then to two: on a small VM
#                     the unpinned median is mostly where the scheduler put the two ends (an idle vCPU
#                     woken across CPUs costs ~100 us, one CPU ~17 us), not the tool; pinned rows
#                     compare the tools' own cost per round trip
#   busy-polled RR    headroom net rtt --busy-poll vs sockperf pp --lls 50 --nonblocked against a sockperf
#                     server run with the same flags (both ends spin on non-blocking sockets, SO_BUSY_POLL 50 us);
#                     on this VM a busy-polled round trip is ~8 or ~12 us from one 3 s run to the next for
#                     both tools, pinned or not (the host's placement of the two spinning vCPUs), so the
#                     median of 5 compares how often each tool drew the slow placement: a second row
#                     compares each tool's best round
#   UDP, unlimited    headroom net udp --gsro (GSO on send, GRO on receive) vs iperf3 -u -b 0, 1448-byte
#                     datagrams: received Gb/s, loss, CPU s/GB received (both ends); Debian 12's iperf3 3.12
#                     has no GSO/GRO (3.21's --gsro): labelled so. Also headroom without offload, and each
#                     end's datagrams per CPU-second (the arithmetic limit: cores for 10/25/100 GbE)
# IPERF3=path/to/iperf3 picks the peer's binary (e.g. a 3.21 built from esnet/iperf, not
# installed by this project): from 3.19 on, the rows with a receiver that skips the copy run
# iperf3 --skip-rx-copy too, and from 3.21 on the UDP offload rows run iperf3 --gsro: like for like.
# Usage: benches/net_vs_iperf.sh [ROUNDS=5] [SECONDS=3]; HEADROOM=path/to/headroom to pick a binary.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-3}
HEADROOM=${HEADROOM:-target/release/headroom}
[ -x "$HEADROOM" ] || cargo build --release --quiet
IPERF3=${IPERF3:-iperf3}
for p in "$IPERF3" iperf sockperf python3; do command -v "$p" >/dev/null || { echo "net_vs_iperf: $p missing (scripts/install-deps.sh)" >&2; exit 2; }; done
# The peer's version decides which of its modes exist: "3.12", "3.21+" -> 312, 321.
i3_version=$("$IPERF3" --version | sed -n '1s/^iperf \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' | awk '{print $1 * 100 + $2}')
i3_skip=(); i3_gsro=()
[ "${i3_version:-0}" -ge 319 ] && i3_skip=(--skip-rx-copy)
[ "${i3_version:-0}" -ge 321 ] && i3_gsro=(--gsro)
export I3_LABEL="iperf3 $("$IPERF3" --version | awk 'NR == 1 {print $2}')" I3_SKIP=${#i3_skip[@]} I3_GSRO=${#i3_gsro[@]}

P_HR=15301 P_I3=15302 P_I2=15303 P_SP=15304 P_SPB=15305 P_HRP=15306 P_SPP=15307 P_I3P=15308
# The first two CPUs this shell may use: the pinned RR servers sit on the first.
read -r CPU_A CPU_B < <(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1])')
pids=()
# Waits for each server to be gone: a rerun binds the same ports at once.
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
"$HEADROOM" serve --port $P_HR >/dev/null 2>&1 & pids+=($!)
"$IPERF3" -s -p $P_I3 >/dev/null 2>&1 & pids+=($!)
iperf -s -p $P_I2 >/dev/null 2>&1 & pids+=($!)
sockperf sr --tcp -i 127.0.0.1 -p $P_SP >/dev/null 2>&1 & pids+=($!)
taskset -c "$CPU_A" "$HEADROOM" serve --port $P_HRP >/dev/null 2>&1 & pids+=($!)
taskset -c "$CPU_A" sockperf sr --tcp -i 127.0.0.1 -p $P_SPP >/dev/null 2>&1 & pids+=($!)
taskset -c "$CPU_A" "$IPERF3" -s -p $P_I3P >/dev/null 2>&1 & pids+=($!)
# Each server listening before the first round (at most 10 s), or the bench says which is not.
# await_listener PORT: the server on PORT listening (at most 10 s), or the bench says which is not.
await_listener() {
  local port=$1
  listening() { [ -n "$(ss -Hltn "sport = :$port")" ]; }
  for _ in $(seq 100); do listening && break; sleep 0.1; done
  listening || { echo "net_vs_iperf: nothing listens on port $port" >&2; exit 2; }
}
for port in $P_HR $P_I3 $P_I2 $P_SP $P_HRP $P_SPP $P_I3P; do await_listener $port; done

out=$(mktemp -d)
trap 'cleanup; rm -rf "$out"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  "$HEADROOM" net 127.0.0.1:$P_HR --tests up1 --time ${SECS}s --json > "$out/hr1.$r.json"
  "$IPERF3" -c 127.0.0.1 -p $P_I3 -t "$SECS" -J > "$out/i3.$r.json"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests up1 --skip-rx-copy --time ${SECS}s --json > "$out/hr1s.$r.json"
  # Sending by reference, and the copying stream beside it, with the ends on two CPUs.
  on_b() { taskset -c "$CPU_B" "$@"; }
  on_b "$HEADROOM" net 127.0.0.1:$P_HRP --tests up1 --time ${SECS}s --json > "$out/hr1p.$r.json"
  on_b "$IPERF3" -c 127.0.0.1 -p $P_I3P -t "$SECS" -J > "$out/i3p.$r.json"
  on_b "$HEADROOM" net 127.0.0.1:$P_HRP --tests up1 --zerocopy --time ${SECS}s --json > "$out/hr1z.$r.json"
  on_b "$IPERF3" -c 127.0.0.1 -p $P_I3P -t "$SECS" -Z -J > "$out/i3z.$r.json"
  on_b "$IPERF3" -c 127.0.0.1 -p $P_I3P -t "$SECS" -Z "${i3_skip[@]}" -J > "$out/i3zs.$r.json"
  on_b "$HEADROOM" net 127.0.0.1:$P_HRP --tests up1 --zerocopy --skip-rx-copy --time ${SECS}s --json > "$out/hr1zs.$r.json"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests up --streams 4 --time ${SECS}s --json > "$out/hr4.$r.json"
  iperf -c 127.0.0.1 -p $P_I2 -P 4 -t "$SECS" -y C > "$out/i2.$r.csv"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests up --streams 4 --zerocopy --time ${SECS}s --json > "$out/hr4z.$r.json"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests up --streams 4 --skip-rx-copy --time ${SECS}s --json > "$out/hr4s.$r.json"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests rtt --time ${SECS}s --json > "$out/hrrr.$r.json"
  sockperf pp --tcp -i 127.0.0.1 -p $P_SP -t "$SECS" -m 64 > "$out/sp.$r.txt" 2>&1
  for placed in one:$CPU_A two:$CPU_B; do
    taskset -c "${placed#*:}" "$HEADROOM" net 127.0.0.1:$P_HRP --tests rtt --time ${SECS}s --json > "$out/hrrr-${placed%%:*}.$r.json"
    taskset -c "${placed#*:}" sockperf pp --tcp -i 127.0.0.1 -p $P_SPP -t "$SECS" -m 64 > "$out/sp-${placed%%:*}.$r.txt" 2>&1
  done
  "$HEADROOM" net 127.0.0.1:$P_HR --tests rtt --busy-poll --time ${SECS}s --json > "$out/hrrrb.$r.json"
  # sockperf's busy-polling server spins a whole core even with no client, so it
  # runs only for its own row (left running, it took a core from every other row).
  sockperf sr --tcp -i 127.0.0.1 -p $P_SPB --lls 50 --nonblocked >/dev/null 2>&1 & spb_server=$!; pids+=($spb_server)
  await_listener $P_SPB
  sockperf pp --tcp -i 127.0.0.1 -p $P_SPB -t "$SECS" -m 64 --lls 50 --nonblocked > "$out/spb.$r.txt" 2>&1
  kill $spb_server; wait $spb_server 2>/dev/null || true
  "$HEADROOM" net 127.0.0.1:$P_HR --tests udp --udp 400G --gsro --time ${SECS}s --json > "$out/hru.$r.json"
  "$IPERF3" -c 127.0.0.1 -p $P_I3 -u -b 0 -l 1448 -t "$SECS" -J > "$out/i3u.$r.json"
  "$IPERF3" -c 127.0.0.1 -p $P_I3 -u -b 0 -l 1448 -t "$SECS" "${i3_gsro[@]}" -J > "$out/i3ug.$r.json"
  "$HEADROOM" net 127.0.0.1:$P_HR --tests udp --udp 400G --time ${SECS}s --json > "$out/hrun.$r.json"
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$out" "$ROUNDS" <<'PY'
import json, os, re, statistics, sys
i3_name = os.environ["I3_LABEL"]
i3_skip = f"{i3_name} -Z --skip-rx-copy" if os.environ["I3_SKIP"] != "0" else f"{i3_name} -Z (rx copies)"
i3_gsro = f"{i3_name} --gsro" if os.environ["I3_GSRO"] != "0" else f"{i3_name} (no GSO)"
d, n = sys.argv[1], int(sys.argv[2])
def med(xs): return statistics.median(xs)
def spread(xs): return f"[{min(xs):.4g} .. {max(xs):.4g}]"
hr1, i3, hrcpu, i3cpu, hr4, i2, hrrr, sp = [], [], [], [], [], [], [], []
hr1s, hrscpu = [], []
hr1z, hrzcpu, i3z, i3zcpu, hr1zs, hrzscpu, hr4z, hr4s = [], [], [], [], [], [], [], []
i3zs, i3zscpu = [], []
hr1p, hrpcpu, i3p, i3pcpu = [], [], [], []
def iperf3_stream(name, rate, cpu):
    j = json.load(open(name))["end"]
    rate.append(j["sum_received"]["bits_per_second"])
    c = j["cpu_utilization_percent"]
    secs, gb = j["sum_sent"]["seconds"], j["sum_received"]["bytes"] / 1e9
    cpu.append((c["host_total"] + c["remote_total"]) / 100 * secs / gb)
def applied(p, key, want):
    assert p["details"].get(key) == want, f"{key} not applied as asked: {p['details'].get(key)}"
hrrrb, spb = [], []
pinned = {k: [] for k in ("hr-one", "sp-one", "hr-two", "sp-two")}
def sockperf_rtt(name):
    # sockperf prints half the round trip: doubled.
    m = re.search(r"percentile 50\.000 =\s*([\d.]+)", open(name).read())
    return 2 * float(m.group(1))
def headroom_rtt(name):
    return json.load(open(name))["probes"][0]["summary"]["latency_ns"]["p50"] / 1e3
# UDP: received Gb/s, loss %, CPU s per GB received, datagrams per CPU-second (sender, receiver).
udp = {k: {"gbps": [], "loss": [], "cpu": [], "tx_dps": [], "rx_dps": []} for k in ("hru", "hrun", "i3u", "i3ug")}
def udp_headroom(name, offload):
    p = json.load(open(name))["probes"][0]
    d, u = p["details"], p["details"]["udp"]
    if offload:
        assert d["udp_offload"] == {"local": {"gso": True}, "remote": {"gro": True}}, f"--gsro not applied: {d['udp_offload']}"
    gb = p["summary"]["bytes"] / 1e9
    got = u["packets"] - u["lost"]
    return (p["summary"]["bytes_per_sec"] * 8 / 1e9, u["loss_percent"], d["cpu_local_s_per_gb"] + d["cpu_remote_s_per_gb"],
            u["packets"] / (d["cpu_local_s_per_gb"] * gb), got / (d["cpu_remote_s_per_gb"] * gb))
def udp_iperf3(name):
    j = json.load(open(name))["end"]
    rx, tx, c = j["sum_received"], j["sum_sent"], j["cpu_utilization_percent"]
    got = rx["packets"] - rx["lost_packets"]
    cpu_tx, cpu_rx = c["host_total"] / 100 * tx["seconds"], c["remote_total"] / 100 * tx["seconds"]
    return (rx["bits_per_second"] / 1e9, rx["lost_percent"], (cpu_tx + cpu_rx) / (rx["bytes"] / 1e9),
            tx["packets"] / cpu_tx, got / cpu_rx)
def one_stream(name, rate, cpu):
    p = json.load(open(name))["probes"][0]
    rate.append(p["summary"]["bytes_per_sec"] * 8)
    cpu.append(p["details"]["cpu_local_s_per_gb"] + p["details"]["cpu_remote_s_per_gb"])
    return p
for r in range(1, n + 1):
    one_stream(f"{d}/hr1.{r}.json", hr1, hrcpu)
    skipped = one_stream(f"{d}/hr1s.{r}.json", hr1s, hrscpu)["details"]["skip_rx_copy"]
    assert skipped == {"remote": True}, f"--skip-rx-copy not applied at the receiver: {skipped}"
    applied(one_stream(f"{d}/hr1z.{r}.json", hr1z, hrzcpu), "zerocopy", {"local": True})
    p = one_stream(f"{d}/hr1zs.{r}.json", hr1zs, hrzscpu)
    applied(p, "zerocopy", {"local": True})
    applied(p, "skip_rx_copy", {"remote": True})
    iperf3_stream(f"{d}/i3.{r}.json", i3, i3cpu)
    iperf3_stream(f"{d}/i3z.{r}.json", i3z, i3zcpu)
    one_stream(f"{d}/hr1p.{r}.json", hr1p, hrpcpu)
    iperf3_stream(f"{d}/i3p.{r}.json", i3p, i3pcpu)
    iperf3_stream(f"{d}/i3zs.{r}.json", i3zs, i3zscpu)
    hr4.append(json.load(open(f"{d}/hr4.{r}.json"))["probes"][0]["summary"]["bytes_per_sec"] * 8)
    p = json.load(open(f"{d}/hr4z.{r}.json"))["probes"][0]
    applied(p, "zerocopy", {"local": True})
    hr4z.append(p["summary"]["bytes_per_sec"] * 8)
    p = json.load(open(f"{d}/hr4s.{r}.json"))["probes"][0]
    applied(p, "skip_rx_copy", {"remote": True})
    hr4s.append(p["summary"]["bytes_per_sec"] * 8)
    rows = [l.strip().split(",") for l in open(f"{d}/i2.{r}.csv") if l.strip()]
    sums = [row for row in rows if row[5] == "-1"]  # a SUM row (id -1), when iperf2 prints one
    i2.append(float(sums[-1][8]) if sums else sum(float(row[8]) for row in rows))
    # Medians of the RTT distributions: means are dominated by scheduler outliers on a busy host.
    hrrr.append(headroom_rtt(f"{d}/hrrr.{r}.json"))
    sp.append(sockperf_rtt(f"{d}/sp.{r}.txt"))
    for cpus in ("one", "two"):
        pinned[f"hr-{cpus}"].append(headroom_rtt(f"{d}/hrrr-{cpus}.{r}.json"))
        pinned[f"sp-{cpus}"].append(sockperf_rtt(f"{d}/sp-{cpus}.{r}.txt"))
    busy = json.load(open(f"{d}/hrrrb.{r}.json"))["probes"][0]
    assert busy["details"]["busy_poll"]["remote"]["spin"], f"--busy-poll not applied at the server: {busy['details']}"
    hrrrb.append(busy["summary"]["latency_ns"]["p50"] / 1e3)
    spb.append(sockperf_rtt(f"{d}/spb.{r}.txt"))
    for key, fig in (("hru", udp_headroom(f"{d}/hru.{r}.json", True)), ("hrun", udp_headroom(f"{d}/hrun.{r}.json", False)),
                     ("i3u", udp_iperf3(f"{d}/i3u.{r}.json")), ("i3ug", udp_iperf3(f"{d}/i3ug.{r}.json"))):
        for field, x in zip(("gbps", "loss", "cpu", "tx_dps", "rx_dps"), fig):
            udp[key][field].append(x)
rows = [
    ("TCP 1 stream Gb/s", [x / 1e9 for x in hr1], "iperf3", [x / 1e9 for x in i3], ">= 1.0"),
    ("TCP 1 stream CPU, both ends s/GB", hrcpu, "iperf3", i3cpu, "<= 1.0"),
    ("TCP 1 stream, receiver skips the copy Gb/s", [x / 1e9 for x in hr1s], "iperf3 (copies)", [x / 1e9 for x in i3], ">= 1.15"),
    ("TCP 1 stream, receiver skips the copy CPU s/GB", hrscpu, "iperf3 (copies)", i3cpu, "<= 0.7"),
    ("TCP 1 stream, ends on two CPUs Gb/s", [x / 1e9 for x in hr1p], "iperf3", [x / 1e9 for x in i3p], ">= 1.0"),
    ("TCP 1 stream, ends on two CPUs CPU s/GB", hrpcpu, "iperf3", i3pcpu, "<= 1.0"),
    ("TCP 1 stream, two CPUs, both send by reference Gb/s", [x / 1e9 for x in hr1z], "iperf3 -Z", [x / 1e9 for x in i3z], ">= 1.0"),
    ("TCP 1 stream, two CPUs, both send by reference CPU s/GB", hrzcpu, "iperf3 -Z", i3zcpu, "<= 1.0"),
    ("TCP 1 stream, two CPUs, by reference, receiver skips Gb/s", [x / 1e9 for x in hr1zs], i3_skip, [x / 1e9 for x in i3zs], ">= 1.15"),
    ("TCP 1 stream, two CPUs, by reference, receiver skips CPU s/GB", hrzscpu, i3_skip, i3zscpu, "<= 0.7"),
    ("TCP 4 streams Gb/s", [x / 1e9 for x in hr4], "iperf2 -P 4", [x / 1e9 for x in i2], ">= 1.0"),
    ("TCP 4 streams, by reference Gb/s", [x / 1e9 for x in hr4z], "iperf2 -P 4 (copies)", [x / 1e9 for x in i2], "info"),
    ("TCP 4 streams, receivers skip the copy Gb/s", [x / 1e9 for x in hr4s], "iperf2 -P 4 (copies)", [x / 1e9 for x in i2], ">= 1.1"),
    ("TCP RR RTT p50 us", hrrr, "sockperf pp x2", sp, "0.9 .. 1.1"),
    ("TCP RR, both ends on one CPU, RTT p50 us", pinned["hr-one"], "sockperf pp x2", pinned["sp-one"], "<= 1.0"),
    ("TCP RR, ends on two CPUs, RTT p50 us", pinned["hr-two"], "sockperf pp x2", pinned["sp-two"], "<= 1.0"),
    ("TCP RR busy-polled RTT p50 us", hrrrb, "sockperf --lls 50 --nonblocked x2", spb, "info"),
    # min() as a one-element list: the best round's p50, each tool at its best placement.
    ("TCP RR busy-polled, best round, RTT p50 us", [min(hrrrb)], "sockperf --lls 50 --nonblocked x2", [min(spb)], "<= 1.0"),
    ("UDP unlimited, GSO/GRO, received Gb/s", udp["hru"]["gbps"], i3_gsro, udp["i3ug"]["gbps"], ">= 1.0"),
    ("UDP unlimited, GSO/GRO, loss %", udp["hru"]["loss"], i3_gsro, udp["i3ug"]["loss"], "info"),
    ("UDP unlimited, GSO/GRO, CPU s/GB", udp["hru"]["cpu"], i3_gsro, udp["i3ug"]["cpu"], "<= 1.0"),
    ("UDP unlimited, no offload, received Gb/s", udp["hrun"]["gbps"], i3_name, udp["i3u"]["gbps"], ">= 1.0"),
    ("UDP unlimited, no offload, loss %", udp["hrun"]["loss"], i3_name, udp["i3u"]["loss"], "info"),
    ("UDP unlimited, no offload, CPU s/GB", udp["hrun"]["cpu"], i3_name, udp["i3u"]["cpu"], "<= 1.0"),
]
print(f"{'metric':<62} {'headroom median':>16} {'peer':>15} {'peer median':>12} {'ratio':>7}  goal      spread headroom / peer")
def pct(xs): return (max(xs) - min(xs)) / med(xs) * 100 if med(xs) else 0
for name, a, peer, b, goal in rows:
    print(f"{name:<62} {med(a):>16.4g} {peer:>15} {med(b):>12.4g} {med(a)/med(b):>7.3f}  {goal:<9} {spread(a)} / {spread(b)}")
# The arithmetic limit: datagrams each end handles per CPU-second, and the cores that
# 10/25/100 GbE of 1448-byte datagrams (863k/2.16M/8.63M a second) would need.
print()
print(f"{'UDP datagrams per CPU-second (1448 B)':<48} {'sender':>12} {'receiver':>12}   cores for 10 / 25 / 100 GbE (busier end)")
for key, label in (("hru", "headroom --gsro"), ("hrun", "headroom, no offload"), ("i3ug", i3_gsro), ("i3u", i3_name)):
    tx, rx = med(udp[key]["tx_dps"]), med(udp[key]["rx_dps"])
    cores = [g * 1e9 / 8 / 1448 / min(tx, rx) for g in (10, 25, 100)]
    print(f"{label:<48} {tx:>12.4g} {rx:>12.4g}   {cores[0]:.2f} / {cores[1]:.2f} / {cores[2]:.2f}")
print()
for name, a, peer, b, goal in rows:
    # The line benches/all.sh collects (benches/lib.sh's bench_row).
    metric, unit = name.rsplit(" ", 1)
    print(f"BENCHROW|network (loopback)|{metric}|{unit}|{med(a):.6g}|{pct(a):.1f}|{peer}|{med(b):.6g}|{pct(b):.1f}|{med(a)/med(b):.3f}|{goal}")
PY
