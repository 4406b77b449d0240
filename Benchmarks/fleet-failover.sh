#!/usr/bin/env bash
# Failover of a killed node's tenants (issue 24's figure): from SIGKILL (of
# the node's server and Litestream, its disk deleted) to the first
# acknowledged write of each tenant it owned, p50 and max over `kills`
# kills, for both restore timings (eager; on the first request), one run
# each of scripts/fleet-chaos with only its kill scenario (each kill is
# followed by the node's empty rejoin), durable acknowledgements, $tenants
# tenants (30; 1,000 for issue 33's figure: p99 ≤ 5 s) and 8 writers
# through HAProxy; each tenant of the killed node is probed on its own
# (32 probers at once). Goal: max ≤ 5 s with a 2 s lease.
# Prints a Markdown table for Benchmarks/RESULTS.md. Release build
# (--server PATH to use one made beforehand).
#
# Usage: Benchmarks/fleet-failover.sh [kills=10] [tenants=30] [--server PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${1:-10}
shift || true
tenants=30
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then tenants=$1; shift; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
status=0
for restore in eager on-first-request; do
    echo "failover with --restore $restore, $kills kills…" >&2
    scripts/fleet-chaos --mode durable --scenarios kill --kills "$kills" --restore "$restore" \
        --tenants "$tenants" --writers 8 --seconds 3 "$@" >"$work/$restore.json" || status=$?
done
python3 - "$work" "$kills" "$load_before" "$status" "$tenants" <<'PY'
import json, os, subprocess, sys, time
work, kills, load_before, status, tenants = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
rows = []
for restore in ("eager", "on-first-request"):
    report = json.load(open(os.path.join(work, f"{restore}.json")))
    durable = report["modes"].get("durable", {})
    times = durable.get("failover_seconds", [])
    rows.append(f"| {restore} | {len(times)} | {report['failover_seconds_p50']} | {report.get('failover_seconds_p99')} | {report['failover_seconds_max']} | "
                f"{durable.get('failover_unrecovered')} | {report['acknowledged_writes']} | {report['acknowledged_writes_lost']} | "
                f"{'; '.join(report['failed']) or 'none'} |")
    network = report["network"]
    # What failed, to the log: the table keeps only the count.
    for example in durable.get("failure_examples", []):
        print(f"{restore}: {example}", file=sys.stderr)
print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, load average {load_before} before, "
      f"{' '.join(open('/proc/loadavg').read().split()[:3])} after; network {network}; {kills} kills per timing, "
      f"2 s lease, durable acknowledgements, {tenants} tenants, 8 writers through HAProxy (scripts/fleet-chaos --scenarios kill).")
print()
print("| restore | tenant failovers | p50 s | p99 s | max s | never writable | acknowledged writes | lost | checks failed |")
print("|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
sys.exit(status)
PY
