#!/usr/bin/env bash
# scripts/bench-compaction.sh - produce latency while the log cleaner works (issue 16):
# sluice-bench e2e at 20k records/s of 1 KiB on one topic while a background keyed
# producer keeps a compacted topic dirty, once with log.cleaner.enable=true and once
# with false. The churn is the same in both runs, so the only difference is the cleaner.
#
#   ./scripts/bench-compaction.sh          the full run (about a minute)
#   ./scripts/bench-compaction.sh --quick  a tiny version of the same (about 20 s; CI:
#                                          asserts no timings, fails only on errors)
#
# Each run starts a fresh single-node broker (log.cleaner.backoff.ms 1000, so the
# cleaner looks again a second after it finds nothing to do; Kafka's default of 15 s
# would leave it idle for most of a 20 s run), then:
#   churn  sluice-bench produce --keyed --keys 10000 of 1 KiB at CHURN_RATE records/s
#          (5,000/s, about 5.2 MB/s, in the full run; 19,000/s, 20 MB/s, starves the
#          measured client on 2 cores even without the cleaner), acks=1, into "churn": 3
#          partitions, cleanup.policy=compact, segment.bytes 1 MiB,
#          min.cleanable.dirty.ratio 0.1; it starts LEAD (5 s) before the measurement and
#          runs until after it
#   e2e    sluice-bench e2e at 20,000 records/s of 1 KiB, acks=all, 20 s (2 s warm-up),
#          unkeyed, on "e2e" (6 partitions): the figures (p50/p99/p99.9/max ms)
# After each run: the cleaner's totals from /metrics (bytes read and written, passes,
# records removed), the bytes of the churn topic's segments on disk, the broker's CPU
# (cores) and its longest GC stop-the-world pause (GODEBUG=gctrace=1) during the e2e
# run. Output: a table on stdout; the raw JSON lines and logs stay in $SLUICE_BENCH_KEEP
# if set (else a temp dir that is removed). SLUICE_CHURN_RATE overrides the churn's
# records/s; SLUICE_BENCH_CONFIGS ("key=value key=value") adds broker configs to both
# runs; SLUICE_BENCH_ORDER="false true" runs the case without the cleaner first (the
# default is "true false"). Needs go, python3.
set -euo pipefail

# shellcheck source=scripts/lib/bench-args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-args.sh"
bench_args 30 "$@"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench_need "the /metrics scrape and the table" python3

BENCH_NAME=bench-compaction.sh BENCH_KEEP="results.jsonl *.log *.metrics"
# shellcheck source=scripts/lib/bench-common.sh
source scripts/lib/bench-common.sh # the cd above made the repo root the working dir

if [ "$QUICK" = 1 ]; then
	RATE=2000 E2E_DUR=2 WARMUP=1s CHURN_RATE=2000 LEAD=1 TAIL=1
else
	RATE=20000 E2E_DUR=20 WARMUP=2s CHURN_RATE=5000 LEAD=5 TAIL=3
fi
CHURN_RATE=${SLUICE_CHURN_RATE:-$CHURN_RATE}
CHURN_KEYS=10000

log "build (go build -o $WORK/bin)"
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/sluice" ./cmd/sluice
go build -o "$WORK/bin/sluice-bench" ./cmd/sluice-bench
BENCH="$WORK/bin/sluice-bench"


# json_line OUTPUT: the JSON line of a sluice-bench run.
json_line() { grep -m1 '^{' <<<"$1" || true; }

# metric FILE NAME: the value of an unlabelled metric in a /metrics dump (0 if absent).
metric() { awk -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) print 0 }' "$1"; }

RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

# run_case ENABLE: one broker with log.cleaner.enable=ENABLE, the churn and the e2e run.
run_case() {
	local enable=$1 name="cleaner-$1"
	local data="$WORK/$name-data" cfg="$WORK/$name.yaml" blog="$WORK/$name.log"
	mkdir -p "$data"
	cat >"$cfg" <<-EOF
		configs:
		  log.cleaner.enable: "$enable"
		  log.cleaner.backoff.ms: "1000"
	EOF
	local kv
	for kv in ${SLUICE_BENCH_CONFIGS:-}; do
		printf '  %s: "%s"\n' "${kv%%=*}" "${kv#*=}" >>"$cfg"
	done
	sync # the previous run's dirty pages would be written back during this one
	GODEBUG=gctrace=1 "$WORK/bin/sluice" serve --config "$cfg" --data-dir "$data" \
		--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$blog" 2>&1 &
	local bpid=$!
	PIDS+=("$bpid")
	local line addr admin
	line=$(wait_line "$blog" 'msg="broker started"' "$bpid")
	addr=$(sed -E 's/.*listeners=\[([^] ]+)\].*/\1/' <<<"$line")
	admin=$(sed -E 's/.* admin=([^ ]+).*/\1/' <<<"$line")
	log "$name: broker $addr (admin $admin, pid $bpid)"

	local churn_dur=$((LEAD + E2E_DUR + TAIL))
	log "$name: churn: produce --keyed --keys $CHURN_KEYS --rate $CHURN_RATE for ${churn_dur}s into compacted \"churn\""
	"$BENCH" produce --brokers "$addr" --topic churn --partitions 3 \
		--topic-config cleanup.policy=compact --topic-config segment.bytes=1048576 \
		--topic-config min.cleanable.dirty.ratio=0.1 \
		--keyed --keys "$CHURN_KEYS" --record-size 1024 --acks 1 --rate "$CHURN_RATE" \
		--duration "${churn_dur}s" --progress 0 --timeout 5m >"$WORK/$name-churn.out" 2>"$WORK/$name-churn.log" &
	local cpid=$!
	PIDS+=("$cpid")
	sleep "$LEAD"

	log "$name: e2e --rate $RATE --record-size 1024 --acks all --duration ${E2E_DUR}s --warmup $WARMUP"
	local out rc=0 from to gc
	from=$(wc -l <"$blog")
	out=$("$BENCH" e2e --brokers "$addr" --broker-pid "$bpid" --topic e2e --partitions 6 \
		--record-size 1024 --acks all --rate "$RATE" --duration "${E2E_DUR}s" --warmup "$WARMUP" \
		--progress 0 --timeout 5m 2>"$WORK/$name-e2e.log") || rc=$?
	to=$(wc -l <"$blog")
	# gctrace: "gc N @T s P%: A+B+C ms clock, ..."; A and C are the stop-the-world phases.
	gc=$(sed -n "$((from + 1)),${to}p" "$blog" | awk '
		/^gc [0-9]+ @/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ms" && $(i+2) == "clock,") {
			split($i, p, "+"); s = p[1] + p[3]; if (s > max) max = s; n++ } }
		END { printf "%.3f %d", max, n }')
	local e2e
	e2e=$(json_line "$out")
	if [ "$rc" -ne 0 ] || [ -z "$e2e" ]; then
		echo "bench-compaction.sh: $name: e2e failed (exit $rc):" >&2
		printf '%s\n' "$out" >&2
		cat "$WORK/$name-e2e.log" >&2
		return 1
	fi
	rc=0
	wait "$cpid" || rc=$?
	local churn
	churn=$(json_line "$(cat "$WORK/$name-churn.out")")
	if [ "$rc" -ne 0 ] || [ -z "$churn" ]; then
		echo "bench-compaction.sh: $name: churn failed (exit $rc):" >&2
		cat "$WORK/$name-churn.out" "$WORK/$name-churn.log" >&2
		return 1
	fi

	local m="$WORK/$name.metrics"
	python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
		"http://$admin/metrics" >"$m"
	local churn_bytes
	# the segments' bytes (the indexes are preallocated, so du would count their full size)
	churn_bytes=$(find "$data" -path '*churn-*' -name '*.log' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	printf '{"case":"%s","cleaner":%s,"bytes_read":%s,"bytes_written":%s,"passes":%s,"records_removed":%s,"errors":%s,"churn_disk_bytes":%s,"gc_max_ms":%s,"gc_count":%s,"e2e":%s,"churn":%s}\n' \
		"$name" "$enable" "$(metric "$m" sluice_log_cleaner_bytes_read_total)" \
		"$(metric "$m" sluice_log_cleaner_bytes_written_total)" "$(metric "$m" sluice_log_cleaner_passes_total)" \
		"$(metric "$m" sluice_log_cleaner_records_removed_total)" "$(metric "$m" sluice_log_cleaner_errors_total)" \
		"$churn_bytes" "${gc% *}" "${gc#* }" "$e2e" "$churn" >>"$RESULTS"

	kill -TERM "$bpid"
	wait "$bpid" || true
	rm -rf "$data"
}

# SLUICE_BENCH_ORDER="false true" runs the case without the cleaner first.
for enable in ${SLUICE_BENCH_ORDER:-true false}; do
	case "$enable" in
	true | false) run_case "$enable" ;;
	*)
		echo "bench-compaction.sh: SLUICE_BENCH_ORDER: want true and false, got $enable" >&2
		exit 2
		;;
	esac
done

python3 - "$RESULTS" "$QUICK" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
quick = sys.argv[2] == "1"
print(f"\nproduce latency while the cleaner works{' (--quick: tiny rates, figures mean nothing)' if quick else ''}\n")
hdr = ["log.cleaner.enable", "e2e rec/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "churn rec/s", "churn MB/s",
       "cleaner read MB", "cleaner written MB", "passes", "records removed", "churn segments MB",
       "broker CPU", "GC max ms"]
out = [hdr]
for r in rows:
    e, c, lat = r["e2e"], r["churn"], r["e2e"]["latency_ms"]
    out.append([str(r["cleaner"]).lower(), f'{e["records_per_sec"]:,.0f}', f'{lat["p50"]:.2f}', f'{lat["p99"]:.2f}',
                f'{lat["p99_9"]:.2f}', f'{lat["max"]:.2f}', f'{c["records_per_sec"]:,.0f}', f'{c["mb_per_sec"]:.1f}',
                f'{r["bytes_read"] / 1e6:,.1f}', f'{r["bytes_written"] / 1e6:,.1f}', f'{r["passes"]:.0f}',
                f'{r["records_removed"]:,.0f}', f'{r["churn_disk_bytes"] / 1e6:,.1f}',
                f'{e["broker"]["cpu_util"]:.2f}', f'{r["gc_max_ms"]:.2f}'])
w = [max(len(x[i]) for x in out) for i in range(len(hdr))]
for j, x in enumerate(out):
    print("  ".join(v.rjust(w[i]) if i else v.ljust(w[i]) for i, v in enumerate(x)))
    if j == 0:
        print("  ".join("-" * w[i] for i in range(len(hdr))))
def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else None

p99 = {c: median([r["e2e"]["latency_ms"]["p99"] for r in rows if r["cleaner"] == c]) for c in (True, False)}
on, off = p99[True], p99[False]
if on is not None and off:
    runs = "" if len(rows) == 2 else " (medians of the runs of each)"
    print(f"\np99 with the cleaner / without{runs}: {on:.2f} / {off:.2f} ms = {on / off:.2f} (aim: at most 1.20)")
errs = [(r["case"], r["e2e"]["errors"], r["churn"]["errors"], r["errors"]) for r in rows
        if r["e2e"]["errors"] or r["churn"]["errors"] or r["errors"]]
print("errors (case, e2e, churn, cleaner):", errs if errs else "none")
bad = bool(errs) or any(r["e2e"].get("lost") for r in rows)
if not quick and any(r["cleaner"] and r["bytes_read"] <= 0 for r in rows):
    print("the cleaner read nothing: the run did not measure it", file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
PY
echo "bench-compaction.sh: all runs passed"
