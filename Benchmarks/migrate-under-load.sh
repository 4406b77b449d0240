#!/usr/bin/env bash
# Failed requests of a running MultiTenantServer under wrk write load while
# `registryctl migrate --config` adds a column to its N tenants (issue 12,
# item 6: busy timeouts on every connection of the daemon and the CLI).
#
# Usage: Benchmarks/migrate-under-load.sh [tenants=100] [seconds=20] [build=debug] [jobs=2]
# The server and registryctl read the same <data>/registry.json (the
# migration folder swapped for a copy with one more migration). Prints wrk's
# totals, registryctl's summary, and the server's error lines.
set -euo pipefail
cd "$(dirname "$0")/.."
tenants=${1:-100}
seconds=${2:-20}
build=${3:-debug}
jobs=${4:-2}

swift build -c "$build" --product registryctl >&2
registryctl="$(swift build -c "$build" --show-bin-path)/registryctl"
swift build -c "$build" --package-path Samples/MultiTenantServer --product MultiTenantServer >&2
server="$(swift build -c "$build" --package-path Samples/MultiTenantServer --show-bin-path)/MultiTenantServer"

work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$server" --port 0 --data "$work/data" > "$work/server.log" 2>&1 &
pid=$!
port=
for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/server.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { cat "$work/server.log" >&2; exit 1; }
base="http://127.0.0.1:$port"
for i in $(seq 1 "$tenants"); do
    curl -sf -X POST "$base/tenants" -H 'Content-Type: application/json' -d "{\"id\":\"t$i\"}" > /dev/null
done

mkdir "$work/players"
cp Migrations/players/0*.sql "$work/players/"
echo "ALTER TABLE player ADD COLUMN nickname TEXT;" > "$work/players/0004_add_nickname.sql"
python3 - "$work/data/registry.json" "$work/data/registry-migrate.json" "$work/players" <<'PY'
import json, sys
document = json.load(open(sys.argv[1]))
document["tenants"]["migrations"] = sys.argv[3]
json.dump(document, open(sys.argv[2], "w"))
PY

cat > "$work/write.lua" <<LUA
local count = 0
function setup(thread)
    count = count + 1
    thread:set("tid", count)
end
local n = 0
request = function()
    n = n + 1
    local path = "/tenants/t" .. math.random(1, $tenants) .. "/players"
    local body = '{"name":"w' .. tid .. '-' .. n .. '","score":' .. (n % 1000) .. '}'
    return wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
end
LUA

echo "tenants=$tenants seconds=$seconds build=$build jobs=$jobs cores=$(nproc)"
wrk -t2 -c16 -d"${seconds}s" -s "$work/write.lua" "$base" > "$work/wrk.txt" 2>&1 &
wrk_pid=$!
sleep 3
start=$(date +%s.%N)
"$registryctl" migrate --config "$work/data/registry-migrate.json" --jobs "$jobs" --no-progress > "$work/migrate.txt" 2>&1 || true
end=$(date +%s.%N)
wait "$wrk_pid"
echo "registryctl migrate: $(tail -1 "$work/migrate.txt") in $(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.2f", e - s}')s"
grep -E "requests in|Non-2xx|Socket errors" "$work/wrk.txt" || true
non2xx=$(grep -o 'Non-2xx or 3xx responses: [0-9]*' "$work/wrk.txt" | grep -o '[0-9]*$' || echo 0)
echo "failed requests (non-2xx): $non2xx"
"$registryctl" status --config "$work/data/registry-migrate.json" --json > "$work/status.json" || true
python3 - "$work/status.json" <<'PY'
import json, sys
document = json.load(open(sys.argv[1]))
tenants = [d for d in document["databases"] if d["name"] != "catalog"]
print("tenants with 0004 applied: %d of %d; failures: %d" % (
    sum("0004_add_nickname.sql" in d["applied"] for d in tenants), len(tenants), len(document["failures"])))
PY
echo "server error lines:"
grep -iE "error|5[0-9][0-9]" "$work/server.log" | head -20 || true
