#!/usr/bin/env bash
# Records what headroom prints, so a refactor can show it changed nothing:
#
#   scripts/golden.sh OUTDIR            (HEADROOM=path/to/headroom, default target/release/headroom)
#   diff -r before/ after/              exact/ must be identical; shape/ is read by a human
#
# exact/  every presenter over the stored result documents (the analysis crate's fixtures):
#         report as table, markdown, csv, json and HTML, compare, link, errors of bad input.
#         These are deterministic: any byte that differs is a change of behaviour.
# shape/  live runs on this machine (disk quick preset in a temporary directory, net and ping
#         against a loopback serve, cpu on one kernel, run on loopback), with every number
#         masked as # and, for JSON, the set of key paths. Figures differ run to run; the
#         lines, words and keys must not. A warning that depends on timing may come and go.
#
# Needs nothing but headroom and jq; cleans up its temporary directory and server.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
H=${HEADROOM:-$ROOT/target/release/headroom}
OUT=${1:?usage: scripts/golden.sh OUTDIR}
FIX=$ROOT/crates/analysis/tests/fixtures
TMP=$(mktemp -d /tmp/golden.XXXXXX)
SERVE_PID=
cleanup() {
    [[ -n $SERVE_PID ]] && kill "$SERVE_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$OUT/exact" "$OUT/shape"
export NO_COLOR=1 COLUMNS=100

# Runs headroom with the rest of the arguments; stdout, stderr and the exit code to FILE.
record() {
    local file=$1
    shift
    local rc=0
    (cd "$TMP" && "$H" "$@") >"$file.out" 2>"$file.err" || rc=$?
    echo "$rc" >"$file.rc"
    # The checkout and the temporary directory differ per run and per worktree.
    sed -i -e "s#$TMP#TMP#g" -e "s#$ROOT#ROOT#g" "$file.out" "$file.err"
}

# Masks figures (and the temporary paths, ports and pids that differ per run).
mask() {
    sed -E -e 's/[0-9]+([.,:][0-9]+)*/#/g' -e 's/ +/ /g' "$1"
}

# Key paths of a JSON document, array indices folded, sorted once each.
keys() {
    jq -c '[paths | map(if type == "number" then "[]" else . end)] | unique[]' "$1" 2>/dev/null || echo "not json"
}

exact() {
    for doc in "$FIX"/*.json "$FIX"/annotated/*.json; do
        local name
        name=$(basename "$(dirname "$doc")")-$(basename "$doc" .json)
        for format in table markdown csv json; do
            record "$OUT/exact/report-$name.$format" report "$doc" --format "$format"
        done
        record "$OUT/exact/report-$name.iec" report "$doc" --iec
        record "$OUT/exact/report-$name.html" report "$doc" --html "$TMP/r.html"
        [[ -f $TMP/r.html ]] && mv "$TMP/r.html" "$OUT/exact/report-$name.html.html"
    done
    record "$OUT/exact/report-three" report "$FIX"/compare-before.json "$FIX"/compare-after.json "$FIX"/compare-again.json
    record "$OUT/exact/compare" compare "$FIX"/compare-before.json "$FIX"/compare-after.json
    record "$OUT/exact/compare.json" compare "$FIX"/compare-before.json "$FIX"/compare-after.json --json
    record "$OUT/exact/compare.md" compare "$FIX"/compare-before.json "$FIX"/compare-after.json --format markdown
    local i=0
    for spec in 1gbe 10gbe,pcie3x4,nvme usb3-5g 2.5gbe --json '25gbe --mtu 9000' '10gbe,10gbe,10gbe --hops cut-through --frame-size 64' 'nfs:10gbe' iscsi:25gbe; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        record "$OUT/exact/link-$i" link $spec
    done
    local j=0
    for bad in 'disk --bs 3x' 'disk --qd 0' 'net' 'run --share nfs://' 'link 7gbe' 'report /nonexistent.json' \
        "report $FIX/not-json.json" "report $FIX/future-schema.json" 'disk --rw sideways' 'ping' 'cpu --kernels nope'; do
        j=$((j + 1))
        # shellcheck disable=SC2086
        record "$OUT/exact/bad-$j" $bad
    done
}

shape_of() {
    local name=$1
    # A JSON document's samples and process lists vary in length: its keys are its shape.
    if [[ $name == *json || $name == run ]]; then
        keys "$OUT/shape/$name.out" >"$OUT/shape/$name.keys"
    else
        mask "$OUT/shape/$name.out" >"$OUT/shape/$name.masked"
    fi
    mask "$OUT/shape/$name.err" >"$OUT/shape/$name.err.masked"
    rm "$OUT/shape/$name.out" "$OUT/shape/$name.err"
}

shape() {
    local port=$((30000 + $$ % 20000))
    "$H" serve --bind 127.0.0.1 --port "$port" >"$TMP/serve.log" 2>&1 &
    SERVE_PID=$!
    sleep 1
    mkdir -p "$TMP/d"
    record "$OUT/shape/disk" disk "$TMP/d" --preset quick --size 64M
    record "$OUT/shape/disk-json" disk "$TMP/d" --preset quick --size 64M --json
    record "$OUT/shape/net" net "127.0.0.1:$port" --tests up1,down1 --time 1s
    record "$OUT/shape/net-json" net "127.0.0.1:$port" --tests up1,down1,bidir1 --time 1s --json
    record "$OUT/shape/ping" ping "127.0.0.1:$port" --count 3 --interval 50ms
    record "$OUT/shape/ping-json" ping "127.0.0.1:$port" --count 3 --interval 50ms --json
    record "$OUT/shape/cpu" cpu --kernels sha256 --threads 1 --time 200ms
    record "$OUT/shape/cpu-json" cpu --kernels sha256 --threads 1 --time 200ms --json
    record "$OUT/shape/run" run --server "127.0.0.1:$port" --path "$TMP/d" --json
    for name in disk disk-json net net-json ping ping-json cpu cpu-json run; do
        shape_of "$name"
    done
}

exact
shape
echo "golden: $(find "$OUT" -type f | wc -l) files in $OUT"
