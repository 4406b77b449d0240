#!/usr/bin/env bash
# Two release builds of the sample server side by side, seeded alike, their
# leaderboard reads measured in alternation (A B A B…) with wrk, so that
# both meet the same machine: for "did this change move the read path",
# where server-vs-plain.sh's single pass per build is too noisy.
#
# Usage: Benchmarks/ab-reads.sh A_BIN_DIR B_BIN_DIR [rounds=3] [seconds=8]
#   A_BIN_DIR, B_BIN_DIR: folders of release builds of MultiTenantServer
#   (with their resource bundles), e.g. a checkout of the old commit's
#   `swift build -c release --package-path Samples/MultiTenantServer --show-bin-path`.
# Prints one line per measurement, then the mean of each.
set -euo pipefail
cd "$(dirname "$0")/.."
a_bin=${1:?A_BIN_DIR}
b_bin=${2:?B_BIN_DIR}
rounds=${3:-3}
seconds=${4:-8}
tenants=100
players=20
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
begin_run
# The limits server-vs-plain.sh runs with.
export MTS_MAX_STREAMS_PER_TENANT=1016 MTS_MAX_STREAMS=1016 MTS_MAX_CONNECTIONS=2024
start a "$a_bin/MultiTenantServer" --port 0 --data "$work/a-data"
start b "$b_bin/MultiTenantServer" --port 0 --data "$work/b-data"
echo "seeding $tenants tenants x $players players on each server…" >&2
seed "$a" "$work/a-tenants"
seed "$b" "$work/b-tenants"
export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
declare -A sum=([a]=0 [b]=0)
for round in $(seq 1 "$rounds"); do
    for which in a b; do
        base=${!which}
        output=$(WRK_TENANTS="$work/$which-tenants" wrk -t2 -c32 -d"${seconds}s" -s Benchmarks/wrk/reads.lua "$base/tenants/t0/leaderboard")
        rps=$(echo "$output" | awk '/Requests\/sec/ {print $2}')
        errors=$(echo "$output" | awk '/non-2xx or errors/ {print $NF}')
        [ "$errors" = 0 ] || { echo "$which: $errors requests failed" >&2; echo "$output" >&2; exit 1; }
        echo "round $round $which reads/s $rps"
        sum[$which]=$(awk -v s="${sum[$which]}" -v r="$rps" 'BEGIN { print s + r }')
    done
done
for which in a b; do
    awk -v w="$which" -v s="${sum[$which]}" -v n="$rounds" 'BEGIN { printf "%s mean reads/s %.0f\n", w, s / n }'
done
