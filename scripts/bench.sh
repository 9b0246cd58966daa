#!/usr/bin/env bash
# scripts/bench.sh - the reference runs of issue 9: one fixed suite of sluice-bench runs
# against Sluice, against franz-go's kfake (storing records in a data dir) and against a
# broker that accepts and discards (the client's ceiling), all in
# the same run, then a table of the figures side by side.
#
#   ./scripts/bench.sh            the full suite (a few minutes)
#   ./scripts/bench.sh --quick    a tiny version of the same (CI: asserts no timings,
#                                 fails only on errors)
#
# The suite (partitions: 6, replication factor 1, one client process at a time):
#   p100u / p100k  produce 1M x 100 B, acks=1, unkeyed / keyed
#   p1ku / p1kk    produce 200k x 1 KiB, acks=all (idempotent), lz4, unkeyed / keyed
#   p1kn           produce 200k x 1 KiB, acks=1, no compression (the issue's CPU/GiB figure)
#   c100u / c1ku   consume everything of p100u / p1ku, one consumer
#   g1kk           consume everything of p1kk, a group of 3 members
#   e2eu / e2ek    e2e at 20k records/s of 1 KiB, acks=all, 20 s (2 s warm-up), unkeyed / keyed
#   e2ew           e2ek over a topic of 1,000 partitions (the RSS and GC figure; the
#                  peak RSS column is the broker's peak so far, and this case runs last)
# The ceiling broker (bench/internal/kfakeref.Front in front of a kfake) stores nothing
# and does next to nothing per request: produce is acknowledged unread, and its consumers
# read synthetic batches of the same record size (bounded by --records) from one
# pre-encoded response. It has no e2e.
#
# Each broker process runs with GODEBUG=gctrace=1, so the table can show its longest GC
# stop-the-world pause during each case. Output: the table on stdout; the raw JSON lines,
# the logs and the broker's data stay in $SLUICE_BENCH_KEEP if set (else a temp dir that
# is removed). Needs go, python3 (to format the table).
set -euo pipefail

# shellcheck source=scripts/lib/bench-args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-args.sh"
bench_args 28 "$@"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench_need "the table" python3

BENCH_NAME=bench.sh BENCH_KEEP="results.jsonl *.log"
# shellcheck source=scripts/lib/bench-common.sh
source scripts/lib/bench-common.sh # the cd above made the repo root the working dir

# ---- build -----------------------------------------------------------------------------

log "build (go build -o $WORK/bin)"
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/sluice" ./cmd/sluice
go build -o "$WORK/bin/sluice-bench" ./cmd/sluice-bench
# sluice-kfake is in the bench/ module (its own go.mod, so kfake stays out of the broker's)
go build -C bench -o "$WORK/bin/sluice-kfake" ./cmd/sluice-kfake
BENCH="$WORK/bin/sluice-bench"

# ---- brokers ---------------------------------------------------------------------------


declare -A ADDR PID LOG

# Sluice: single node, default config, data in the temp dir, kernel-chosen ports (read
# back from its "broker started" line).
start_sluice() {
	mkdir -p "$WORK/sluice-data"
	LOG[sluice]="$WORK/sluice.log"
	GODEBUG=gctrace=1 "$WORK/bin/sluice" serve --data-dir "$WORK/sluice-data" \
		--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"${LOG[sluice]}" 2>&1 &
	PID[sluice]=$!
	PIDS+=("$!")
	local line
	line=$(wait_line "${LOG[sluice]}" 'msg="broker started"' "${PID[sluice]}")
	ADDR[sluice]=$(sed -E 's/.*listeners=\[([^] ]+)\].*/\1/' <<<"$line")
}

# start_kfake NAME ARGS...: a sluice-kfake process; it prints "listening ADDR".
start_kfake() {
	local name=$1
	shift
	LOG[$name]="$WORK/$name.log"
	# stdout (the "listening" line) apart from stderr (gctrace): a GC line written
	# in the middle of it would hide it from wait_line.
	GODEBUG=gctrace=1 "$WORK/bin/sluice-kfake" "$@" >"$WORK/$name.out" 2>"${LOG[$name]}" &
	PID[$name]=$!
	PIDS+=("$!")
	local line
	line=$(wait_line "$WORK/$name.out" '^listening ' "${PID[$name]}")
	ADDR[$name]=${line#listening }
}

log "start brokers"
start_sluice
mkdir -p "$WORK/kfake-data"
start_kfake kfake --mode reference --data-dir "$WORK/kfake-data"
start_kfake ceil100 --mode ceiling --synthetic-bytes 100 --synthetic-compression none --front
start_kfake ceil1k --mode ceiling --synthetic-bytes 1024 --synthetic-compression lz4 --front
for b in sluice kfake ceil100 ceil1k; do
	log "  $b: ${ADDR[$b]} (pid ${PID[$b]})"
done

# ---- the suite -------------------------------------------------------------------------

if [ "$QUICK" = 1 ]; then
	N100=20000 N1K=5000 RATE=2000 E2E_DUR=3s WARMUP=1s WIDE=60
else
	N100=1000000 N1K=200000 RATE=20000 E2E_DUR=20s WARMUP=2s WIDE=1000
fi
PARTS=6
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
FAILED=0

# bench CASE BROKER LOGNAME ARGS...: one sluice-bench run against BROKER's address with its
# pid; appends {"case","broker","gc_max_ms","gc_count","result"} to the results.
bench() {
	local case=$1 broker=$2 logname=$3
	shift 3
	local addr=${ADDR[$logname]} pid=${PID[$logname]} out rc=0 from to gc
	from=$(wc -l <"${LOG[$logname]}")
	log "$case on $broker: sluice-bench $*"
	out=$("$BENCH" "$@" --brokers "$addr" --broker-pid "$pid" --partitions "${CASE_PARTS:-$PARTS}" --timeout 5m) || rc=$?
	to=$(wc -l <"${LOG[$logname]}")
	# gctrace: "gc N @T s P%: A+B+C ms clock, ..."; A and C are the stop-the-world phases.
	gc=$(sed -n "$((from + 1)),${to}p" "${LOG[$logname]}" | awk '
		/^gc [0-9]+ @/ { for (i = 1; i <= NF; i++) if ($(i+1) == "ms" && $(i+2) == "clock,") {
			split($i, p, "+"); s = p[1] + p[3]; if (s > max) max = s; n++ } }
		END { printf "%.3f %d", max, n }')
	local line
	line=$(grep -m1 '^{' <<<"$out" || true)
	if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
		echo "bench.sh: $case on $broker failed (exit $rc):" >&2
		printf '%s\n' "$out" >&2
		FAILED=$((FAILED + 1))
		return 0
	fi
	printf '{"case":"%s","broker":"%s","gc_max_ms":%s,"gc_count":%s,"result":%s}\n' \
		"$case" "$broker" "${gc% *}" "${gc#* }" "$line" >>"$RESULTS"
}

P100=(--record-size 100 --acks 1 --records "$N100" --progress 10s)
P1K=(--record-size 1024 --acks all --compression lz4 --records "$N1K" --progress 10s)
P1KN=(--record-size 1024 --acks 1 --compression none --records "$N1K" --progress 10s)
E2E=(--record-size 1024 --acks all --rate "$RATE" --duration "$E2E_DUR" --warmup "$WARMUP" --progress 10s)

for b in sluice kfake ceiling; do
	# The ceiling brokers are kfakeref.Front processes: produce acknowledged unread,
	# every fetch answered from one pre-encoded response. Its produce goes to ceil100
	# (the size does not matter); its consumes read synthetic records of the case's size.
	pl=$b c100=$b c1k=$b
	if [ "$b" = ceiling ]; then pl=ceil100 c100=ceil100 c1k=ceil1k; fi
	bench p100u "$b" "$pl" produce --topic p100u "${P100[@]}"
	bench p100k "$b" "$pl" produce --topic p100k --keyed "${P100[@]}"
	bench p1ku "$b" "$pl" produce --topic p1ku "${P1K[@]}"
	bench p1kk "$b" "$pl" produce --topic p1kk --keyed "${P1K[@]}"
	bench p1kn "$b" "$pl" produce --topic p1kn "${P1KN[@]}"
	if [ "$b" = ceiling ]; then
		bench c100u "$b" "$c100" consume --topic p100u --records "$N100" --progress 10s
		bench c1ku "$b" "$c1k" consume --topic p1ku --records "$N1K" --progress 10s
		bench g1kk "$b" "$c1k" consume --topic p1kk --members 3 --records "$N1K" --progress 10s
	else
		bench c100u "$b" "$c100" consume --topic p100u --progress 10s
		bench c1ku "$b" "$c1k" consume --topic p1ku --progress 10s
		bench g1kk "$b" "$c1k" consume --topic p1kk --members 3 --progress 10s
		# The produce cases leave GBs of dirty pages; their writeback would land in the
		# e2e latencies, which are about the broker, so flush them first.
		sync
		bench e2eu "$b" "$b" e2e --topic e2eu "${E2E[@]}"
		bench e2ek "$b" "$b" e2e --topic e2ek --keyed "${E2E[@]}"
		CASE_PARTS=$WIDE bench e2ew "$b" "$b" e2e --topic e2ew --keyed "${E2E[@]}"
	fi
done

# ---- the table -------------------------------------------------------------------------

python3 - "$RESULTS" "$QUICK" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
quick = sys.argv[2] == "1"
by = {(r["case"], r["broker"]): r for r in rows}
cases = []
for r in rows:
    if r["case"] not in cases:
        cases.append(r["case"])

def fmt(v, d=0):
    if v is None:
        return "-"
    if isinstance(v, float) and d:
        return f"{v:,.{d}f}"
    return f"{v:,.0f}"

def ratio(a, b):
    return "-" if a is None or b in (None, 0) else f"{a / b:.2f}"

def get(case, broker, *path):
    r = by.get((case, broker))
    if r is None:
        return None
    v = r
    for p in path:
        if v is None:
            return None
        v = v.get(p)
    return v

print(f"\nsluice-bench reference runs{' (--quick: tiny counts, figures mean nothing)' if quick else ''}\n")
hdr = ["case", "figure", "sluice", "kfake", "ceiling", "sluice/kfake", "sluice/ceiling",
       "sluice CPU-s/GiB", "kfake CPU-s/GiB", "ceiling CPU-s/GiB", "sluice GC max ms", "sluice peak RSS MiB"]
out = [hdr]
for c in cases:
    e2e = get(c, "sluice", "result", "mode") == "e2e" or get(c, "kfake", "result", "mode") == "e2e"
    cpu = [get(c, b, "result", "broker", "cpu_s_per_gib") for b in ("sluice", "kfake", "ceiling")]
    rss = get(c, "sluice", "result", "broker", "peak_rss_bytes")
    common = [fmt(cpu[0], 2) if cpu[0] is not None else "-", fmt(cpu[1], 2) if cpu[1] is not None else "-",
              fmt(cpu[2], 2) if cpu[2] is not None else "-",
              fmt(get(c, "sluice", "gc_max_ms"), 2) if get(c, "sluice", "gc_max_ms") is not None else "-",
              fmt(rss / 2**20, 1) if rss else "-"]
    if e2e:
        for i, (name, key) in enumerate([("p50 ms", "p50"), ("p99 ms", "p99"), ("p99.9 ms", "p99_9"), ("max ms", "max")]):
            s, k = get(c, "sluice", "result", "latency_ms", key), get(c, "kfake", "result", "latency_ms", key)
            out.append([c if i == 0 else "", name, fmt(s, 2) if s is not None else "-", fmt(k, 2) if k is not None else "-", "-",
                        ratio(s, k), "-"] + (common if i == 0 else [""] * len(common)))
    else:
        for i, (name, key, d) in enumerate([("records/s", "records_per_sec", 0), ("MB/s", "mb_per_sec", 1)]):
            s, k, ce = (get(c, b, "result", key) for b in ("sluice", "kfake", "ceiling"))
            out.append([c if i == 0 else "", name] + [fmt(v, d) if v is not None else "-" for v in (s, k, ce)]
                       + [ratio(s, k), ratio(s, ce)] + (common if i == 0 else [""] * len(common)))
w = [max(len(r[i]) for r in out) for i in range(len(hdr))]
for j, r in enumerate(out):
    print("  ".join(x.rjust(w[i]) if i > 1 else x.ljust(w[i]) for i, x in enumerate(r)))
    if j == 0:
        print("  ".join("-" * w[i] for i in range(len(hdr))))
errs = [(r["case"], r["broker"], r["result"]["errors"]) for r in rows if r["result"]["errors"]]
print("\nerrors:", errs if errs else "none")
print("client GC longest pause (ms, any case):", max((r["result"]["client"]["gc_pause_max_ms"] for r in rows), default=0))
PY

if [ "$FAILED" -gt 0 ]; then
	echo "bench.sh: $FAILED runs failed" >&2
	exit 1
fi
echo "bench.sh: all runs passed"
