#!/usr/bin/env bash
# A forwarded read against a direct one (issue 24's figure): three fleet
# nodes; leaderboard reads (wrk, reads.lua) of the tenants node n1 owns,
# sent to n1 itself (served) and to n2 (which reverse-proxies each to n1),
# in `rounds` alternating rounds. Prints the p50 overhead of forwarding and
# the throughput ratio, as a Markdown table for Benchmarks/RESULTS.md.
# Release build (SAMPLE_BIN: one made beforehand).
#
# Usage: Benchmarks/fleet-forwarding.sh [tenants=30] [players=20] [seconds=10] [connections=32] [rounds=2]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-30}
players=${2:-20}
seconds=${3:-10}
connections=${4:-32}
rounds=${5:-2}
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
sample_release
source Benchmarks/lib/fleet.sh
fleet_bench_begin 3

for i in 1 2 3; do fleet_bench_node "$i" forwarding async; done
file="$FLEET_WORK/forwarding/tenants"
: >"$file"
echo "creating $tenants tenants x $players players…" >&2
for t in $(seq 0 $((tenants - 1))); do create_tenant "${node_url[1]}" "t$t" 0 "$file"; done
fleet_bench_settle "${node_url[1]}"
fleet_bench_seed_players "${node_url[1]}" "$file" "$players"
fleet_bench_owned n1 "$file" "${node_url[1]}" "$FLEET_WORK/forwarding/owned"
owned=$(wc -l <"$FLEET_WORK/forwarding/owned")

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=""
direct_p50s=() forwarded_p50s=() direct_rps=() forwarded_rps=()
for round in $(seq 1 "$rounds"); do
    echo "round $round…" >&2
    read -r dr d50 d99 de < <(fleet_bench_wrk "${node_url[1]}" /tenants/t0/leaderboard reads.lua "$FLEET_WORK/forwarding/owned")
    read -r fr f50 f99 fe < <(fleet_bench_wrk "${node_url[2]}" /tenants/t0/leaderboard reads.lua "$FLEET_WORK/forwarding/owned")
    rows+="| $round | direct (n1, the owner) | $dr | $d50 | $d99 | $de |"$'\n'
    rows+="| $round | forwarded (n2 → n1) | $fr | $f50 | $f99 | $fe |"$'\n'
    direct_p50s+=("$d50"); forwarded_p50s+=("$f50"); direct_rps+=("$dr"); forwarded_rps+=("$fr")
done
d50=$(median "${direct_p50s[@]}"); f50=$(median "${forwarded_p50s[@]}")
dr=$(median "${direct_rps[@]}"); fr=$(median "${forwarded_rps[@]}")

cat <<TABLE
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $(nproc) cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; network $FLEET_NETWORK; 3 nodes; wrk -t2 -c$connections -d${seconds}s reads.lua over the $owned tenants (of $tenants) n1 owns, $players players each.

| round | path | reads/s | p50 ms | p99 ms | non-2xx or errors |
|---|---|---|---|---|---|
${rows%$'\n'}

Forwarding, medians of $rounds rounds: p50 overhead **$(awk -v a="$f50" -v b="$d50" 'BEGIN {printf "%+.2f ms", a - b}')**, throughput $(awk -v a="$fr" -v b="$dr" 'BEGIN {printf "%.2f×", a / b}') of direct.
TABLE
