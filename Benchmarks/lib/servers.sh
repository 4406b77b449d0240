# Sourced by the benchmark scripts that run the sample server (and the
# plain one): the run's scratch folder, starting a server and seeding its
# tenants. The caller calls begin_run first, and sets `tenants` and
# `players` for seed.

# Makes the scratch folder `work` and the array `pids` of the servers that
# the exit stops (and waits for) before deleting the folder, and exports a
# random MTS_OPERATOR_TOKEN (the sample wants at least 32 characters).
begin_run() {
    work=$(mktemp -d)
    pids=()
    trap end_run EXIT
    export MTS_OPERATOR_TOKEN="benchmark-operator-token-$(od -An -tx1 -N16 /dev/urandom | tr -d " \n")"
}

end_run() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}

# Starts a server; sets the variable named $1 to its base URL once it
# listens. Not in a command substitution: its subshell would keep the pid
# from `pids`, and the cleanup would leave the server running.
start() {
    local var=$1; shift
    "$@" >"$work/$var.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 600); do
        if port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/$var.log" | grep -o '[0-9]*$'); then
            printf -v "$var" 'http://127.0.0.1:%s' "$port"; return
        fi
        sleep 0.1
    done
    echo "$var did not start:" >&2; cat "$work/$var.log" >&2; exit 1
}

# Creates tenant $2 on the server at $1 with $3 players (seed0…, scored
# 0…), and appends its "id token" line (for wrk) to $4. One curl for the
# players (chained with --next, on one connection).
create_tenant() {
    local base=$1 id=$2 count=$3 file=$4 token
    token=$(curl -sf -X POST "$base/tenants" -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" \
        -H 'Content-Type: application/json' -d "{\"id\":\"$id\"}" | sed -E 's/.*"token":"([^"]+)".*/\1/')
    [ -n "$token" ] || { echo "creating tenant $id on $base failed" >&2; exit 1; }
    echo "$id $token" >>"$file"
    local args=()
    for p in $(seq 0 $((count - 1))); do
        [ "$p" -gt 0 ] && args+=(--next)
        args+=(-sf -o /dev/null -X POST "$base/tenants/$id/players" -H "Authorization: Bearer $token"
            -H 'Content-Type: application/json' -d "{\"name\":\"seed$p\",\"score\":$p}")
    done
    [ "$count" -eq 0 ] || curl "${args[@]}" || { echo "seeding tenant $id on $base failed" >&2; exit 1; }
}

# Creates `tenants` tenants t0… of `players` players each on the server at
# $1, and writes their "id token" lines (for wrk) to $2.
seed() {
    local base=$1 file=$2
    : >"$file"
    for t in $(seq 0 $((tenants - 1))); do
        create_tenant "$base" "t$t" "$players" "$file"
    done
}

# Sets `sample_bin` to the folder of the sample's release build: $SAMPLE_BIN
# when set (a build made beforehand, with its resource bundle), else built here.
sample_release() {
    if [ -n "${SAMPLE_BIN:-}" ]; then sample_bin=$SAMPLE_BIN; return; fi
    swift build -c release --package-path Samples/MultiTenantServer --product MultiTenantServer >&2
    sample_bin="$(swift build -c release --package-path Samples/MultiTenantServer --show-bin-path)"
}

# The median of the numbers given (the mean of the middle two for an even
# count): the figure of several alternating rounds.
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
