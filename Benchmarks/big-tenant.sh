#!/usr/bin/env bash
# Issue 23: a write to a big tenant costs what a write to a small one does.
# The sample server (release) with two tenants, "small" (20 players) and
# "big" (100,000 players by default), and wrk writing new players to one
# of them at a time, in alternating rounds (small, big, small, big, …) so
# that the machine's drift touches both alike. The players of "big" are
# inserted with the sqlite3 tool while the server is stopped (an HTTP write
# per player would make seeding the benchmark); the server's first write
# to that tenant then checks its invariants over the whole tenant once
# (a write by another connection), and every later write checks only the
# rows it changed.
#
# Usage: Benchmarks/big-tenant.sh [players=100000] [seconds=10] [connections=8] [rounds=3]
# Prints a Markdown table for Benchmarks/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
players=${1:-100000}
seconds=${2:-10}
connections=${3:-8}
rounds=${4:-3}
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 is missing: run scripts/bootstrap" >&2; exit 1; }

source Benchmarks/lib/servers.sh
sample_release
begin_run
# The player quota (10,000 by default) would refuse the big tenant's writes.
export MTS_MAX_PLAYERS=100000000

start first "$sample_bin/MultiTenantServer" --port 0 --data "$work/data"
create_tenant "$first" small 20 "$work/small"
create_tenant "$first" big 20 "$work/big"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

big_file=$(find "$work/data" -name 'big.sqlite' | head -n 1)
[ -n "$big_file" ] || { echo "no file for tenant big under $work/data" >&2; exit 1; }
echo "inserting $((players - 20)) players into $big_file…" >&2
sqlite3 "$big_file" "WITH RECURSIVE n(i) AS (SELECT 20 UNION ALL SELECT i + 1 FROM n WHERE i < $players - 1)
    INSERT INTO player (name, score) SELECT 'seed' || i, i % 1000 FROM n; PRAGMA wal_checkpoint(TRUNCATE);"
count=$(sqlite3 "$big_file" "SELECT COUNT(*) FROM player")

start sample "$sample_bin/MultiTenantServer" --port 0 --data "$work/data"
export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
# Runs wrk's writes against the tenants of $1; prints "requests/s p50 p99 non2xx".
load() {
    local output
    output=$(WRK_TENANTS="$1" wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$WRK_SCRIPTS/writes.lua" "$sample/tenants/x/players")
    echo "$output" >>"$work/wrk.log"
    echo "$(echo "$output" | awk '/Requests\/sec/ {print $2}') $(echo "$output" | awk '$1 == "50%" {print $2}') $(echo "$output" | awk '$1 == "99%" {print $2}') $(echo "$output" | awk '/non-2xx or errors/ {print $NF}')"
}
# The first write to "big" pays its one whole-tenant check: not measured.
curl -sf -o /dev/null -X POST "$sample/tenants/big/players" -H "Authorization: Bearer $(cut -d' ' -f2 "$work/big")" \
    -H 'Content-Type: application/json' -d '{"name":"warm-up","score":1}'

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
ratios=()
for round in $(seq 1 "$rounds"); do
    read -r small small50 small99 smallErrors < <(load "$work/small")
    read -r big big50 big99 bigErrors < <(load "$work/big")
    ratio=$(awk -v a="$big" -v b="$small" 'BEGIN { printf "%.2f", a / b }')
    ratios+=("$ratio")
    rows+=("| $round | $small | $small50 | $small99 | $big | $big50 | $big99 | **${ratio}×** | $smallErrors, $bigErrors |")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

cat <<TABLE
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $(nproc) cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; wrk -t2 -c$connections -d${seconds}s writes.lua; tenant "big": $count players before the run, "small": 20.

| round | small req/s | p50 | p99 | big req/s | p50 | p99 | big / small | non-2xx (small, big) |
|---|---|---|---|---|---|---|---|---|
$(printf '%s\n' "${rows[@]}")

Median big / small: **${median}×**.
TABLE
