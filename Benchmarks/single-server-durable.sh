#!/usr/bin/env bash
# Issue 33, item 5: a single server's durable writes against its
# asynchronous ones, with and without the durable tail, one run. Three
# sample servers (release) up at once, each with its own folder replica
# store on the local disk and its own Litestream:
#   async    answered at commit (loss window: Litestream's sync interval),
#   tail     durable, answered once the write's round (every tenant's ready
#            changes, one object) is in the store's tail/,
#   rounds   durable with "durableTail": false: answered once Litestream's
#            `sync wait` has the commit in the replica (grouped per tenant).
# wrk writes new players over $tenants tenants round-robin, the three in
# alternating order each round (drift hits all alike). Then, on the tail
# server, a tenant of $players players against one of 20 (writes to one
# tenant at a time, 8 connections, alternating).
# Prints a Markdown block for Benchmarks/RESULTS.md.
#
# Usage: Benchmarks/single-server-durable.sh [tenants=30] [seconds=10] [connections=32] [rounds=3] [players=30000]
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-30}
seconds=${2:-10}
connections=${3:-32}
rounds=${4:-3}
players=${5:-30000}
litestream="$PWD/.build-venv/bin/litestream"
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 is missing: run scripts/bootstrap" >&2; exit 1; }
[ "$("$litestream" version 2>/dev/null)" = "0.5.17" ] || { echo "Litestream 0.5.17 is missing: run scripts/bootstrap" >&2; exit 1; }

source Benchmarks/lib/servers.sh
sample_release
begin_run
export MTS_MAX_PLAYERS=100000000

# A data directory with its registry.json and its own replica store.
configure() {
    local name=$1 acknowledgements=$2 tail=$3
    local data="$work/$name"
    mkdir -p "$data"
    cat >"$data/registry.json" <<JSON
{"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
 "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 2048},
 "shutdownTimeoutSeconds": 5,
 "replication": {"replica": "$work/$name-replica", "litestream": "$litestream", "socket": "$work/$name.sock",
                 "acknowledgements": "$acknowledgements", "durableTail": $tail}}
JSON
}
configure async async true
configure tail durable true
configure rounds durable false
for name in async tail rounds; do
    start "url_$name" "$sample_bin/MultiTenantServer" --port 0 --data "$work/$name"
    url="url_$name"
    : >"$work/$name-tenants"
    for t in $(seq 0 $((tenants - 1))); do create_tenant "${!url}" "t$t" 0 "$work/$name-tenants"; done
done

export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
# Runs wrk's writes on $1 over the tenants of file $2 with $3 connections;
# prints "requests/s p50 p99 non2xx".
load() {
    local output
    output=$(WRK_TENANTS="$2" wrk -t2 -c"$3" -d"${seconds}s" --latency -s "$WRK_SCRIPTS/writes.lua" "$1/tenants/x/players")
    echo "$output" >>"$work/wrk.log"
    echo "$(echo "$output" | awk '/Requests\/sec/ {print $2}') $(ms "$(echo "$output" | awk '$1 == "50%" {print $2}')") $(ms "$(echo "$output" | awk '$1 == "99%" {print $2}')") $(echo "$output" | awk '/non-2xx or errors/ {print $NF}')"
}
# wrk's latency (850.00us, 1.20ms, 2.01s) in ms.
ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'; }

echo "warming up (every tenant opened; the durable ones' first write brings their replica up to date)…" >&2
for name in async tail rounds; do url="url_$name"; seconds=3 load "${!url}" "$work/$name-tenants" "$connections" >/dev/null; done

declare -A rps p50 p99 errors
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
orders=("async tail rounds" "rounds tail async" "tail async rounds")
for round in $(seq 1 "$rounds"); do
    for name in ${orders[$(((round - 1) % 3))]}; do
        echo "round $round: $name…" >&2
        url="url_$name"
        read -r r a b e < <(load "${!url}" "$work/$name-tenants" "$connections")
        rps[$name-$round]=$r p50[$name-$round]=$a p99[$name-$round]=$b errors[$name-$round]=$e
    done
done
summary() {
    local name=$1 r=() a=() b=() round
    for round in $(seq 1 "$rounds"); do r+=("${rps[$name-$round]}"); a+=("${p50[$name-$round]}"); b+=("${p99[$name-$round]}"); done
    echo "$(median "${r[@]}") $(median "${a[@]}") $(median "${b[@]}")"
}
read -r async_rps async_p50 async_p99 < <(summary async)
read -r tail_rps tail_p50 tail_p99 < <(summary tail)
read -r rounds_rps rounds_p50 rounds_p99 < <(summary rounds)
all_errors=$(for label in "${!errors[@]}"; do echo "$label=${errors[$label]}"; done | sort | tr '\n' ' ')
tail_objects=$(find "$work/tail-replica/tail" -type f 2>/dev/null | wc -l)

# A big tenant against a small one, on the tail server.
echo "a tenant of $players players against one of 20…" >&2
create_tenant "$url_tail" small 20 "$work/small"
create_tenant "$url_tail" big 20 "$work/big"
kill "${pids[1]}"; wait "${pids[1]}" 2>/dev/null || true
big_file=$(find "$work/tail" -name 'big.sqlite' | head -n 1)
sqlite3 "$big_file" "WITH RECURSIVE n(i) AS (SELECT 20 UNION ALL SELECT i + 1 FROM n WHERE i < $players - 1)
    INSERT INTO player (name, score) SELECT 'seed' || i, i % 1000 FROM n;"
start url_tail "$sample_bin/MultiTenantServer" --port 0 --data "$work/tail"
for tenant in small big; do
    curl -sf -o /dev/null -X POST "$url_tail/tenants/$tenant/players" -H "Authorization: Bearer $(cut -d' ' -f2 "$work/$tenant")" \
        -H 'Content-Type: application/json' -d '{"name":"warm-up","score":1}'
done
ratios=()
for round in $(seq 1 "$rounds"); do
    read -r small _ _ _ < <(load "$url_tail" "$work/small" 8)
    read -r big _ _ _ < <(load "$url_tail" "$work/big" 8)
    ratios+=("$(awk -v a="$big" -v b="$small" 'BEGIN {printf "%.2f", a / b}')")
    echo "round $round: small $small, big $big writes/s" >&2
done

cat <<BLOCK
$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; one server each, folder replica store on the local disk; wrk -t2 -c$connections -d${seconds}s writes.lua over $tenants tenants; medians of $rounds rounds in alternating order.

| configuration | writes/s | p50 ms | p99 ms | vs async (throughput) | p50 overhead vs async |
|---|---|---|---|---|---|
| asynchronous | $async_rps | $async_p50 | $async_p99 | 1.00× | 0 |
| durable, tail in the store | $tail_rps | $tail_p50 | $tail_p99 | **$(awk -v a="$tail_rps" -v b="$async_rps" 'BEGIN {printf "%.2f×", a / b}')** (goal ≥ 0.7×) | **$(awk -v a="$tail_p50" -v b="$async_p50" 'BEGIN {printf "%+.2f ms", a - b}')** (goal ≤ 3 ms) |
| durable, Litestream rounds (\`durableTail: false\`) | $rounds_rps | $rounds_p50 | $rounds_p99 | $(awk -v a="$rounds_rps" -v b="$async_rps" 'BEGIN {printf "%.2f×", a / b}') | $(awk -v a="$rounds_p50" -v b="$async_p50" 'BEGIN {printf "%+.2f ms", a - b}') |

Tail objects in the store at the end of the runs: $tail_objects. non-2xx or errors per run: $all_errors

A tenant of $players players against one of 20, durable with the tail, 8 connections, writes to one at a time: big/small per round $(IFS=', '; echo "${ratios[*]}"), median **$(median "${ratios[@]}")×** (goal ≥ 0.8×).
BLOCK
