# Sourced by Benchmarks/fleet-*.sh (after Benchmarks/lib/servers.sh, whose
# sample_release and create_tenant they use): the fleet's real parts from
# scripts/fleet-env (PostgreSQL, nodes in network namespaces or on
# loopback), the sample's nodes in fleet mode, and wrk.

source scripts/fleet-env

# The scratch folder, the network of $1 nodes (default 3) and PostgreSQL;
# the secrets every node shares (the operator token, the master key, the
# fleet secret).
fleet_bench_begin() {
    fleet_begin
    fleet_net_setup "${1:-3}"
    fleet_pg_start "$FLEET_WORK/pg" "$(fleet_free_port)" >/dev/null
    # Off loopback, nodes forward tokens over TLS only: a fleet CA and a
    # certificate per node, which curl trusts too (wrk does not verify).
    if [ "$FLEET_NETWORK" = netns ]; then
        fleet_tls_setup "${1:-3}"
        export CURL_CA_BUNDLE="$FLEET_TLS_DIR/ca.crt"
    fi
    export MTS_OPERATOR_TOKEN="benchmark-operator-token-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    export MTS_MASTER_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    export MTS_FLEET_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    export MTS_MAX_PLAYERS=100000000
    export PATH="$PWD/.build-venv/bin:$PATH"   # litestream 0.5.17
    export WRK_SCRIPTS="$PWD/Benchmarks/wrk"
    fleet_bench_port=8080
}

# Starts node $1 of configuration $2 (a name: its database fleet_$2, its
# data and replica store under $FLEET_WORK/$2) with acknowledgements $3
# (async | durable | single: no fleet at all, the single-server mode),
# restore timing $4 (eager by default); sets node_url[$1] once it listens.
declare -a node_url
fleet_bench_node() {
    local i=$1 label=$2 acknowledge=$3 restore=${4:-eager}
    local folder="$FLEET_WORK/$label" port=$fleet_bench_port host
    host=$(fleet_node_host "$i")
    [ "$FLEET_NETWORK" = netns ] || port=$(fleet_free_port)
    mkdir -p "$folder/node$i"
    local args=(--host "$host" --port "$port" --data "$folder/node$i/data") scheme=http
    if [ -n "${FLEET_TLS_DIR:-}" ]; then
        scheme=https
        args+=(--tls-cert "$FLEET_TLS_DIR/node$i.crt" --tls-key "$FLEET_TLS_DIR/node$i.key")
        # The fleet's CA is a fleet option: a single server refuses it.
        [ "$acknowledge" = single ] || args+=(--fleet-ca-file "$FLEET_TLS_DIR/ca.crt")
    fi
    if [ "$acknowledge" != single ]; then
        if [ ! -f "$folder/database" ]; then
            fleet_psql -c "CREATE DATABASE fleet_${label//-/_}" >/dev/null
            touch "$folder/database"
        fi
        args+=(--fleet "${FLEET_PG_URL%%/fleet\?*}/fleet_${label//-/_}?$FLEET_PG_TLS" --node-id "n$i" --advertise "$scheme://$host:$port"
            --replica-store "$folder/replicas" --acknowledge "$acknowledge" --restore "$restore")
    fi
    # The sample's first start writes tenants.maxOpen 256 into its
    # registry.json: with more tenants than that in round robin, every
    # request reopens its tenant (300 tenants: 101 against 2,244 writes/s
    # with 512, Benchmarks/RESULTS.md). FLEET_BENCH_MAX_OPEN=N writes N
    # there: a first start, a stop, the edit, the real start.
    if [ -n "${FLEET_BENCH_MAX_OPEN:-}" ] && [ ! -f "$folder/node$i/data/registry.json" ]; then
        (fleet_node_exec "$i" "$sample_bin/MultiTenantServer" "${args[@]}") >"$folder/node$i.first.log" 2>&1 &
        local first=$! waited
        for waited in $(seq 1 600); do
            [ -f "$folder/node$i/data/registry.json" ] && grep -q 'listening on' "$folder/node$i.first.log" && break
            kill -0 "$first" 2>/dev/null || break
            sleep 0.1
        done
        kill -TERM "$first" 2>/dev/null || true
        fleet_wait_pid "$first" 60 || kill -KILL "$first" 2>/dev/null || true
        python3 - "$folder/node$i/data/registry.json" "$FLEET_BENCH_MAX_OPEN" <<'PY' || fleet_fail "could not set maxOpen in node $i's registry.json"
import json, sys
path, value = sys.argv[1], int(sys.argv[2])
document = json.load(open(path))
document["tenants"]["maxOpen"] = value
json.dump(document, open(path, "w"), indent=2)
PY
    fi
    (fleet_node_exec "$i" "$sample_bin/MultiTenantServer" "${args[@]}") >"$folder/node$i.log" 2>&1 &
    FLEET_PIDS+=($!)
    local tries
    for tries in $(seq 1 600); do
        if grep -q 'listening on' "$folder/node$i.log"; then
            node_url[$i]="$scheme://$host:$port"
            fleet_bench_ready "${node_url[$i]}" || { cat "$folder/node$i.log" >&2; return 1; }
            return 0
        fi
        kill -0 "${FLEET_PIDS[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    cat "$folder/node$i.log" >&2
    fleet_fail "node $i ($label) did not start"
}

fleet_bench_ready() {
    local tries
    for tries in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health/ready")" = 200 ] && return 0
        sleep 0.1
    done
    return 1
}

# Stops every node (SIGTERM, then waits: a fleet node hands its tenants
# off and leaves).
fleet_bench_stop_nodes() {
    local pid
    for pid in "${FLEET_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${FLEET_PIDS[@]}"; do fleet_wait_pid "$pid" 60 || kill -KILL "$pid" 2>/dev/null || true; done
    FLEET_PIDS=()
    node_url=()
}

# Prints the placement from the node at $1: "tenant owner epoch" lines.
fleet_bench_placement() {
    curl -sf "$1/fleet/placement" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" | python3 -c '
import json, sys
for row in json.load(sys.stdin):
    print(row["tenant"], row.get("owner"), row.get("epoch"))'
}

# Waits until the placement seen from $1 stays the same for 2 s (joins and
# rebalancing done), 60 s at most.
fleet_bench_settle() {
    local previous="" current stable=0 tries
    for tries in $(seq 1 240); do
        current=$(fleet_bench_placement "$1")
        if [ -n "$current" ] && [ "$current" = "$previous" ]; then
            stable=$((stable + 1)); [ "$stable" -ge 8 ] && return 0
        else
            stable=0
        fi
        previous=$current
        sleep 0.25
    done
    fleet_fail "the placement did not settle within 60 s"
}

# Keeps the lines of tenants file $2 ("id token") whose tenant node $1
# ("n1") owns, per the placement seen from $3; into file $4.
fleet_bench_owned() {
    local owner=$1 file=$2 base=$3 out=$4
    fleet_bench_placement "$base" | awk -v owner="$owner" '$2 == owner {print $1}' >"$out.owned"
    awk 'NR == FNR {owned[$1] = 1; next} ($1 in owned)' "$out.owned" "$file" >"$out"
    [ -s "$out" ] || { fleet_fail "$owner owns none of the tenants"; return 1; }
}

# Runs wrk against $1$2 with Lua script $3 and tenants file $4 ($connections
# connections, $seconds s); prints "requests/s p50_ms p99_ms errors".
fleet_bench_wrk() {
    local base=$1 path=$2 script=$3 tenants_file=$4 output
    output=$(WRK_TENANTS="$tenants_file" wrk -t2 -c"$connections" -d"${seconds}s" --latency -s "$WRK_SCRIPTS/$script" "$base$path")
    echo "$output" >>"$FLEET_WORK/wrk.log"
    echo "$output" | awk '
        function ms(value) {
            if (value ~ /us$/) return substr(value, 1, length(value) - 2) / 1000
            if (value ~ /ms$/) return substr(value, 1, length(value) - 2) + 0
            if (value ~ /s$/) return substr(value, 1, length(value) - 1) * 1000
            return value
        }
        /Requests\/sec/ {rps = $2}
        $1 == "50%" {p50 = ms($2)}
        $1 == "99%" {p99 = ms($2)}
        /non-2xx or errors/ {errors = $NF}
        END {printf "%s %.3f %.3f %s\n", rps, p50, p99, errors == "" ? 0 : errors}'
}

# Writes $3 players (seed0…) to every tenant of tenants file $2 through
# the node at $1: after fleet_bench_settle, when no tenant moves any more
# (a moving tenant's writes get the documented 503 Retry-After).
fleet_bench_seed_players() {
    local base=$1 file=$2 count=$3 id token p
    [ "$count" -gt 0 ] || return 0
    while read -r id token; do
        local args=()
        for p in $(seq 0 $((count - 1))); do
            [ "$p" -gt 0 ] && args+=(--next)
            args+=(-sf -o /dev/null -X POST "$base/tenants/$id/players" -H "Authorization: Bearer $token"
                -H 'Content-Type: application/json' -d "{\"name\":\"seed$p\",\"score\":$p}")
        done
        curl "${args[@]}" || { fleet_fail "seeding tenant $id through $base failed"; return 1; }
    done <"$file"
}
