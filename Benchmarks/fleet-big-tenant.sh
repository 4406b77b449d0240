#!/usr/bin/env bash
# A durable write to a big tenant against one to a small one, in a fleet
# (issue 33's figure: ≥ 0.8×, plain and encrypted; encrypted against plain
# ≥ 0.8×). A one-node fleet with durable acknowledgements and four
# tenants: small and big, plain and encrypted (new small ones in each
# round, of 20 players when it starts). The big ones are grown to
# $players players through the node itself (wrk writes, durable, as any
# client's: the tail, its cuts and the replica follow them), then wrk
# writes new players to one tenant at a time, in `rounds` alternating
# rounds of the four, so that the machine's drift touches all alike.
# Prints a Markdown table for Benchmarks/RESULTS.md. Release build
# (SAMPLE_BIN: one made beforehand).
#
# With server=single, the same on one server with no fleet: durable
# acknowledgements with the durable tail in a folder replica store (an
# encrypted tenant's changes sealed there, its base its encrypted backup).
#
# Usage: Benchmarks/fleet-big-tenant.sh [players=30000] [seconds=5] [connections=8] [rounds=2] [server=fleet|single]
set -euo pipefail
cd "$(dirname "$0")/.."
players=${1:-30000}
seconds=${2:-5}
connections=${3:-8}
rounds=${4:-2}
server=${5:-fleet}
command -v wrk >/dev/null || { echo "wrk is missing: run scripts/bootstrap" >&2; exit 1; }
source Benchmarks/lib/servers.sh
sample_release
source Benchmarks/lib/fleet.sh
fleet_bench_begin 1
case $server in
fleet)
    fleet_bench_node 1 big durable
    setting="one-node fleet, durable acknowledgements (tail in PostgreSQL)" ;;
single)
    data="$FLEET_WORK/big/node1/data"
    mkdir -p "$data"
    cat >"$data/registry.json" <<JSON
{"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
 "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 256,
             "masterKey": {"env": "MTS_MASTER_KEY"}, "allowPlaintextTenants": true},
 "shutdownTimeoutSeconds": 5,
 "replication": {"replica": "$FLEET_WORK/big/replica", "litestream": "$PWD/.build-venv/bin/litestream", "socket": "$FLEET_WORK/big/ls.sock",
                 "acknowledgements": "durable", "durableTail": true,
                 "encryptedBackupDirectory": "$FLEET_WORK/big/encrypted-backups"}}
JSON
    fleet_bench_node 1 big single
    setting="one server, durable acknowledgements (tail in a folder replica store on the local disk)" ;;
*) echo "server is fleet or single, not $server" >&2; exit 2 ;;
esac
base=${node_url[1]}

# "id token" lines, one file per tenant (wrk's tenants file).
create() {  # id encrypted
    local token
    token=$(curl -sf -X POST "$base/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
        -H 'Content-Type: application/json' -d "{\"id\":\"$1\",\"encrypted\":$2}" | sed -E 's/.*"token":"([^"]+)".*/\1/')
    [ -n "$token" ] || { echo "creating tenant $1 failed" >&2; exit 1; }
    echo "$1 $token" >"$FLEET_WORK/$1.tenant"
}
count() {  # id -> players
    local token
    token=$(cut -d' ' -f2 "$FLEET_WORK/$1.tenant")
    curl -sf "$base/tenants/$1/players" -H "Authorization: Bearer $token" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))'
}
create big-plain false
create big-encrypted true
# A small tenant: created with 20 players.
small() {  # id encrypted
    create "$1" "$2"
    while [ "$(count "$1")" -lt 20 ]; do
        curl -sf -o /dev/null -X POST "$base/tenants/$1/players" -H "Authorization: Bearer $(cut -d' ' -f2 "$FLEET_WORK/$1.tenant")" \
            -H 'Content-Type: application/json' -d "{\"name\":\"seed$RANDOM$RANDOM\",\"score\":1}"
    done
}
saved=$seconds
seconds=10
cat "$FLEET_WORK/big-plain.tenant" "$FLEET_WORK/big-encrypted.tenant" >"$FLEET_WORK/big.tenants"
while true; do
    plain=$(count big-plain) encrypted=$(count big-encrypted)
    echo "seeding: big-plain $plain, big-encrypted $encrypted players" >&2
    [ "$plain" -lt "$players" ] || [ "$encrypted" -lt "$players" ] || break
    fleet_bench_wrk "$base" /tenants/big-plain/players writes.lua "$FLEET_WORK/big.tenants" >/dev/null
done
seconds=$saved

# Each round writes to new small tenants (20 players when it starts):
# a round adds thousands of players to the tenant it writes to, and a
# small tenant must stay small. The big ones only grow.
declare -A rps p50 size
configs="small-plain big-plain small-encrypted big-encrypted"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$rounds"); do
    small "small-plain-$round" false
    small "small-encrypted-$round" true
    for config in $configs; do
        id=$config
        case $config in small-*) id=$config-$round ;; esac
        echo "round $round: $id…" >&2
        read -r r a b e < <(fleet_bench_wrk "$base" "/tenants/$id/players" writes.lua "$FLEET_WORK/$id.tenant")
        [ "$e" = 0 ] || echo "round $round, $id: $e non-2xx or errors" >&2
        rps[$config-$round]=$r p50[$config-$round]=$a size[$config-$round]=$(count "$id")
    done
done
declare -A mrps mp50 msize
for config in $configs; do
    r=() a=() z=()
    for round in $(seq 1 "$rounds"); do r+=("${rps[$config-$round]}"); a+=("${p50[$config-$round]}"); z+=("${size[$config-$round]}"); done
    mrps[$config]=$(median "${r[@]}") mp50[$config]=$(median "${a[@]}") msize[$config]="$(printf '%s\n' "${z[@]}" | sort -n | head -n 1)–$(printf '%s\n' "${z[@]}" | sort -n | tail -n 1)"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }
cat <<TABLE
$(date -u '+%Y-%m-%d %H:%M UTC'), 2 cores, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; $setting; wrk -t2 -c$connections -d${seconds}s writes.lua on one tenant at a time; medians of $rounds alternating rounds.

| tenant | players after its rounds | writes/s | p50 ms | against its small one | against plain |
|---|---|---|---|---|---|
| small, plain | ${msize[small-plain]} | ${mrps[small-plain]} | ${mp50[small-plain]} | 1.00× | 1.00× |
| big, plain | ${msize[big-plain]} | ${mrps[big-plain]} | ${mp50[big-plain]} | **$(ratio "${mrps[big-plain]}" "${mrps[small-plain]}")** (goal ≥ 0.8×) | 1.00× |
| small, encrypted | ${msize[small-encrypted]} | ${mrps[small-encrypted]} | ${mp50[small-encrypted]} | 1.00× | **$(ratio "${mrps[small-encrypted]}" "${mrps[small-plain]}")** (goal ≥ 0.8×) |
| big, encrypted | ${msize[big-encrypted]} | ${mrps[big-encrypted]} | ${mp50[big-encrypted]} | **$(ratio "${mrps[big-encrypted]}" "${mrps[small-encrypted]}")** (goal ≥ 0.8×) | **$(ratio "${mrps[big-encrypted]}" "${mrps[big-plain]}")** |
TABLE
