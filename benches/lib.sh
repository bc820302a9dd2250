# Sourced by the bench scripts: the statistics they share and the one
# machine-readable line per compared figure that benches/all.sh collects
# into its table. Owns nothing else: each bench runs its own tools.

# stats FILE COLUMN -> "median spread%" of that column (spread: max - min
# as a percentage of the median).
stats() {
  awk -v c="$2" '{print $c}' "$1" | sort -g | awk '
    { v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          printf "%.6g %.1f", m, (m > 0 ? (v[NR] - v[1]) / m * 100 : 0) }'
}

# median_of FILE COLUMN, spread_of FILE COLUMN -> one of the two stats.
median_of() { stats "$1" "$2" | cut -d' ' -f1; }
spread_of() { stats "$1" "$2" | cut -d' ' -f2; }

# ratio A B -> A / B with three decimals (0 when B is 0).
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'
}

# bench_row BENCH METRIC UNIT HEADROOM_MEDIAN HEADROOM_SPREAD PEER PEER_MEDIAN PEER_SPREAD GOAL
# One line benches/all.sh reads: fields separated by '|', spreads in percent.
bench_row() {
  printf 'BENCHROW|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$(ratio "$4" "$7")" "$9"
}

# bench_row_from BENCH METRIC UNIT PEER GOAL HEADROOM_FILE PEER_FILE COLUMN:
# bench_row over one column of the two series files.
bench_row_from() {
  local hm hs pm ps
  read -r hm hs <<<"$(stats "$6" "$8")"
  read -r pm ps <<<"$(stats "$7" "$8")"
  bench_row "$1" "$2" "$3" "$hm" "$hs" "$4" "$pm" "$ps" "$5"
}
