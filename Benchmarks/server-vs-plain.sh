#!/usr/bin/env bash
# The multi-tenant server (Samples/MultiTenantServer) against the same
# endpoints written by hand on Hummingbird + GRDB (Benchmarks/PlainServer),
# side by side in one run, with Debian's wrk:
#   1. the /health/live ceiling of the sample (HTTP only, no database), with
#      wrk's requests built by Lua as for the reads, then wrk's static request,
#   2. leaderboard reads, tenants round-robin, sample then plain,
#   3. player writes, tenants round-robin, sample then plain,
#   4. SSE fan-out to S subscribers of a few writes, one after the other:
#      from each write's 201 to its delivery on every stream (LoadGenerator;
#      sample only).
# Release builds; both servers run on this machine, with wrk, one phase at
# a time. Prints a Markdown table for Benchmarks/RESULTS.md.
#
# Usage: Benchmarks/server-vs-plain.sh [tenants=100] [players=20] [seconds=10] [connections=32] [subscribers=1000] [fanout_writes=5]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-100}
players=${2:-20}
seconds=${3:-10}
connections=${4:-32}
subscribers=${5:-1000}
fanout_writes=${6:-5}
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }

# SAMPLE_BIN / PLAIN_BIN: folders of release builds made beforehand (the
# sample's with its resource bundle); unset, both are built here.
source Benchmarks/lib/servers.sh
sample_release
if [ -n "${PLAIN_BIN:-}" ]; then plain_bin=$PLAIN_BIN; else
    swift build -c release --package-path Benchmarks/PlainServer >&2
    plain_bin="$(swift build -c release --package-path Benchmarks/PlainServer --show-bin-path)"
fi

begin_run
# The fan-out's subscribers all watch one tenant: above the sample's
# default caps on streams (16 per tenant, 512 in all) and connections.
export MTS_MAX_STREAMS_PER_TENANT=$((subscribers + 16)) MTS_MAX_STREAMS=$((subscribers + 16)) MTS_MAX_CONNECTIONS=$((subscribers + 1024))

start sample "$sample_bin/MultiTenantServer" --port 0 --data "$work/sample-data"
start plain "$plain_bin/PlainServer" --port 0 --data "$work/plain-data"

# The same tenants and players on both servers.
echo "seeding $tenants tenants x $players players on each server…" >&2
seed "$sample" "$work/sample-tenants"
seed "$plain" "$work/plain-tenants"

export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
# Runs wrk; prints "requests/s p50 p99 non2xx".
load() {
    local base=$1 path=$2 script=${3:-} tenants_file=${4:-}
    local args=(-t2 -c"$connections" -d"${seconds}s" --latency)
    [ -n "$script" ] && args+=(-s "$WRK_SCRIPTS/$script")
    local output
    output=$(WRK_TENANTS="$tenants_file" wrk "${args[@]}" "$base$path")
    echo "$output" >>"$work/wrk.log"
    local rps p50 p99 errors
    rps=$(echo "$output" | awk '/Requests\/sec/ {print $2}')
    p50=$(echo "$output" | awk '$1 == "50%" {print $2}')
    p99=$(echo "$output" | awk '$1 == "99%" {print $2}')
    errors=$(echo "$output" | awk '/non-2xx or errors/ {print $NF}')
    echo "$rps $p50 $p99 ${errors:-0}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "measuring… (load average $load_before)" >&2
# The ceiling the reads are compared with: /health/live requested by the
# same Lua machinery as the reads (wrk's static request, below for
# reference, costs wrk less on these shared cores).
read -r ceiling ceiling50 ceiling99 ceilingErrors < <(load "$sample" /health/live health.lua "$work/sample-tenants")
read -r static static50 static99 staticErrors < <(load "$sample" /health/live)
read -r reads reads50 reads99 readsErrors < <(load "$sample" /tenants/t0/leaderboard reads.lua "$work/sample-tenants")
read -r plainReads plainReads50 plainReads99 plainReadsErrors < <(load "$plain" /tenants/t0/leaderboard reads.lua "$work/plain-tenants")
read -r writes writes50 writes99 writesErrors < <(load "$sample" /tenants/t0/players writes.lua "$work/sample-tenants")
read -r plainWrites plainWrites50 plainWrites99 plainWritesErrors < <(load "$plain" /tenants/t0/players writes.lua "$work/plain-tenants")
fanout=$("$plain_bin/LoadGenerator" --url "$sample" --operator-token "$MTS_OPERATOR_TOKEN" --subscribers "$subscribers" --writes "$fanout_writes" | tail -1)

cat <<TABLE
$(date -u +%Y-%m-%d) $(date -u +%H:%M) UTC, $(nproc) cores, load average $load_before before the run, $(cut -d' ' -f1-3 /proc/loadavg) after it; wrk -t2 -c$connections -d${seconds}s; $tenants tenants x $players players.

| phase | sample req/s | p50 | p99 | plain req/s | p50 | p99 | sample / plain | non-2xx (sample, plain) |
|---|---|---|---|---|---|---|---|---|
| \`GET /health/live\` (sample, ceiling: Lua requests as for the reads) | $ceiling | $ceiling50 | $ceiling99 | | | | | $ceilingErrors |
| \`GET /health/live\` (sample, wrk's static request, for reference) | $static | $static50 | $static99 | | | | | $staticErrors |
| \`GET /tenants/{t}/leaderboard\` | $reads | $reads50 | $reads99 | $plainReads | $plainReads50 | $plainReads99 | **$(ratio "$reads" "$plainReads")×** (sample reads = $(ratio "$reads" "$ceiling")× the ceiling, $(ratio "$reads" "$static")× the static one) | $readsErrors, $plainReadsErrors |
| \`POST /tenants/{t}/players\` | $writes | $writes50 | $writes99 | $plainWrites | $plainWrites50 | $plainWrites99 | **$(ratio "$writes" "$plainWrites")×** | $writesErrors, $plainWritesErrors |

$fanout
TABLE
