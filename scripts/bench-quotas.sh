#!/usr/bin/env bash
# scripts/bench-quotas.sh - client quotas (issue 22): a noisy neighbour held to its
# producer_byte_rate, and what enforcing quotas costs the broker.
#
#   ./scripts/bench-quotas.sh          the full run (about 13 minutes)
#   ./scripts/bench-quotas.sh --quick  a tiny version (about 30 s; CI: asserts no
#                                      timings, fails only on errors)
#
# Noisy neighbour: one single-node broker (default config, so quota.window.num 11 and
# quota.window.size.seconds 1) where client-id=tenant-a has producer_byte_rate Q
# (15,000,000 B/s, so that 10 Q is about what one producer gets from this broker on 2
# cores; SLUICE_QUOTA_BYTES sets another); 1 KiB records, acks=1, 6-partition topics,
# one client process each:
#   alone       tenant B (client id tenant-b, no quota) produces at a fixed 5 MB/s
#               (4,883 records/s, linger 0) for B_DUR (90 s) after a 2 s warm-up: its
#               p50/p99 produce latency (send to acknowledgement)
#   with-a      the same while tenant A (tenant-a) is paced at 10 Q (146,484 records/s,
#               catching up after each throttle) from LEAD (15 s) before B until B
#               ends: B's p99 against alone, and A's rate over B's span against Q
#   with-free   control: the same A load from a client id without a quota
#               (tenant-free): what B would see without quotas
#   with-smooth control: a client without a quota paced at Q (tenant-smooth): what a
#               neighbour that keeps to Q evenly costs B
# alone and with-a alternate ROUNDS (2) times; the controls run once, after them.
#
# Enforcement cost: three more brokers, the same flat-out produce run on each (1,000,000
# x 1 KiB, acks=1, no compression, client id sluice-bench; the broker's CPU-s/GiB):
#   none   no quota configured (nothing is resolved or measured)
#   own    producer_byte_rate 1e15 on client-id=sluice-bench: every request resolves
#          and records into a sensor, never throttled
#   many   own, and 1,000 other client ids with quotas (other-client-N)
# in turn, COST_ROUNDS (5) times, with `sync` before each run. The quotas are set with
# sluice-bench quota. SLUICE_BENCH_CONFIGS ("key=value key=value") adds broker configs
# to every broker, e.g. quota.window.num=2. Output: tables on stdout; the raw JSON lines,
# the brokers' logs and /metrics stay in $SLUICE_BENCH_KEEP if set. Needs go, python3
# (the table and the /metrics scrape).
set -euo pipefail

# shellcheck source=scripts/lib/bench-args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-args.sh"
bench_args 36 "$@"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench_need "the /metrics scrape and the table" python3

BENCH_NAME=bench-quotas.sh BENCH_KEEP="results.jsonl *.log *.metrics *.out"
# shellcheck source=scripts/lib/bench-common.sh
source scripts/lib/bench-common.sh # the cd above made the repo root the working dir

Q=${SLUICE_QUOTA_BYTES:-15000000} # tenant A's producer_byte_rate, bytes/s
case "$Q" in
'' | *[!0-9]*)
	echo "bench-quotas.sh: SLUICE_QUOTA_BYTES: want bytes per second, got $Q" >&2
	exit 2
	;;
esac
if [ "$Q" -lt 1024 ]; then
	echo "bench-quotas.sh: SLUICE_QUOTA_BYTES $Q: want at least one 1 KiB record per second" >&2
	exit 2
fi
A_RATE=$((10 * Q / 1024))  # 10 Q in 1 KiB records/s
SMOOTH_RATE=$((Q / 1024)) # Q in 1 KiB records/s
B_RATE=4883               # 5 MB/s in 1 KiB records/s
if [ "$QUICK" = 1 ]; then
	B_DUR=1 B_WARM=1 LEAD=1 ROUNDS=1 N1K=5000 COST_ROUNDS=1
else
	B_DUR=90 B_WARM=2 LEAD=15 ROUNDS=2 N1K=1000000 COST_ROUNDS=5
fi
NOTHERS=1000

log "build (go build -o $WORK/bin)"
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/sluice" ./cmd/sluice
go build -o "$WORK/bin/sluice-bench" ./cmd/sluice-bench
BENCH="$WORK/bin/sluice-bench"

declare -A ADDR ADMIN PID

# The brokers' config: the defaults and SLUICE_BENCH_CONFIGS.
CONFIG="$WORK/broker.yaml"
echo "configs:" >"$CONFIG"
for kv in ${SLUICE_BENCH_CONFIGS:-}; do
	printf '  %s: "%s"\n' "${kv%%=*}" "${kv#*=}" >>"$CONFIG"
done
[ -n "${SLUICE_BENCH_CONFIGS:-}" ] || echo "configs: {}" >"$CONFIG"

# start NAME: a single-node broker on kernel-chosen ports.
start() {
	local name=$1 line
	mkdir -p "$WORK/$name-data"
	"$WORK/bin/sluice" serve --config "$CONFIG" --data-dir "$WORK/$name-data" \
		--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$WORK/$name.log" 2>&1 &
	PID[$name]=$!
	PIDS+=("$!")
	line=$(wait_line "$WORK/$name.log" 'msg="broker started"' "${PID[$name]}")
	ADDR[$name]=$(sed -E 's/.*listeners=\[([^] ]+)\].*/\1/' <<<"$line")
	ADMIN[$name]=$(sed -E 's/.* admin=([^ ]+).*/\1/' <<<"$line")
	log "  $name: ${ADDR[$name]} (admin ${ADMIN[$name]}, pid ${PID[$name]})"
}

# quota BROKER ARGS...: sluice-bench quota against BROKER; fails the script on an error.
quota() {
	local b=$1
	shift
	"$BENCH" quota --brokers "${ADDR[$b]}" --progress 0 "$@" >"$WORK/quota-$b.out" || {
		echo "bench-quotas.sh: setting quotas on $b failed:" >&2
		cat "$WORK/quota-$b.out" >&2
		exit 1
	}
}

# scrape BROKER FILE: the broker's /metrics into FILE.
scrape() {
	python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
		"http://${ADMIN[$1]}/metrics" >"$2"
}

# metric FILE SERIES: the value of one series (name and labels, as printed) in a /metrics
# dump, 0 if absent.
metric() { awk -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) print 0 }' "$1"; }

json_line() { grep -m1 '^{' "$1" || true; }

RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
FAILED=0

# failed WHAT OUT: report a failed run and its output.
failed() {
	echo "bench-quotas.sh: $1 failed:" >&2
	cat "$2" >&2
	FAILED=$((FAILED + 1))
}

log "start brokers"
start tenants
quota tenants --entity client-id=tenant-a --set "producer_byte_rate=$Q"

B_ARGS=(--topic tenant-b --client-id tenant-b --record-size 1024 --acks 1 --linger 0
	--rate "$B_RATE" --duration "$((B_WARM + B_DUR))s" --warmup "${B_WARM}s" --progress 0 --timeout 5m)

# noisy CASE ROUND [CLIENT RATE]: tenant B's run, alone or with a neighbour CLIENT paced
# at RATE records/s that starts LEAD seconds before B and ends with it.
noisy() {
	local case=$1 round=$2 client=${3:-} rate=${4:-} apid="" a=null b rc=0
	local aout="$WORK/$case-$round-a.out" bout="$WORK/$case-$round-b.out"
	sync
	if [ -n "$client" ]; then
		log "$case (round $round): $client at $rate records/s, then tenant-b"
		"$BENCH" produce --brokers "${ADDR[tenants]}" --topic "$client" --client-id "$client" \
			--record-size 1024 --acks 1 --rate "$rate" --duration "$((LEAD + B_WARM + B_DUR))s" \
			--warmup "$((LEAD + B_WARM))s" --progress 0 --timeout 5m >"$aout" 2>&1 &
		apid=$!
		PIDS+=("$apid")
		sleep "$LEAD"
	else
		log "$case (round $round): tenant-b"
	fi
	"$BENCH" produce --brokers "${ADDR[tenants]}" --broker-pid "${PID[tenants]}" "${B_ARGS[@]}" >"$bout" 2>&1 || rc=$?
	b=$(json_line "$bout")
	if [ "$rc" -ne 0 ] || [ -z "$b" ]; then
		failed "$case (round $round): tenant-b (exit $rc)" "$bout"
		b=null
	fi
	if [ -n "$apid" ]; then
		rc=0
		wait "$apid" || rc=$?
		a=$(json_line "$aout")
		if [ "$rc" -ne 0 ] || [ -z "$a" ]; then
			failed "$case (round $round): $client (exit $rc)" "$aout"
			a=null
		fi
	fi
	printf '{"case":"%s","round":%d,"client":"%s","b":%s,"a":%s}\n' "$case" "$round" "$client" "$b" "$a" >>"$RESULTS"
}

for round in $(seq "$ROUNDS"); do
	noisy alone "$round"
	noisy with-a "$round" tenant-a "$A_RATE"
done
noisy with-free 1 tenant-free "$A_RATE"
noisy with-smooth 1 tenant-smooth "$SMOOTH_RATE"
scrape tenants "$WORK/tenants.metrics"
THROTTLED=$(metric "$WORK/tenants.metrics" 'sluice_quota_throttled_responses_total{quota="produce"}')

log "enforcement cost: brokers none, own, many"
start none
start own
start many
quota own --entity client-id=sluice-bench --set producer_byte_rate=1e15
quota many --entity client-id=sluice-bench --set producer_byte_rate=1e15
quota many --count "$NOTHERS" --batch 500 --set producer_byte_rate=1000000
for round in $(seq "$COST_ROUNDS"); do
	for b in none own many; do
		out="$WORK/cost-$b-$round.out"
		log "cost (round $round) on $b: produce $N1K x 1 KiB, acks=1"
		sync
		rc=0
		"$BENCH" produce --brokers "${ADDR[$b]}" --broker-pid "${PID[$b]}" --topic p1kn \
			--record-size 1024 --acks 1 --compression none --records "$N1K" --progress 0 \
			--timeout 5m >"$out" 2>&1 || rc=$?
		line=$(json_line "$out")
		if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
			failed "cost (round $round) on $b (exit $rc)" "$out"
			continue
		fi
		m="$WORK/$b-$round.metrics"
		scrape "$b" "$m"
		printf '{"case":"cost","broker":"%s","round":%d,"sensors":%s,"produce_requests":%s,"result":%s}\n' "$b" "$round" \
			"$(metric "$m" 'sluice_quota_sensors{quota="produce"}')" \
			"$(metric "$m" 'sluice_request_duration_seconds_count{api="Produce"}')" "$line" >>"$RESULTS"
	done
done

python3 - "$RESULTS" "$QUICK" "$Q" "$THROTTLED" "$NOTHERS" "${SLUICE_BENCH_CONFIGS:-}" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
quick, q, throttled, nothers = sys.argv[2] == "1", float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
note = " (--quick: tiny runs, figures mean nothing)" if quick else ""

def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else None

def table(hdr, out, left=1):
    """Prints rows under hdr, the first left columns left-aligned, the rest right."""
    out = [hdr] + out
    w = [max(len(x[i]) for x in out) for i in range(len(hdr))]
    for j, x in enumerate(out):
        print("  ".join(v.ljust(w[i]) if i < left else v.rjust(w[i]) for i, v in enumerate(x)))
        if j == 0:
            print("  ".join("-" * w[i] for i in range(len(hdr))))

noisy = [r for r in rows if r["case"] != "cost"]
configs = sys.argv[6] or "defaults"
print(f"\nnoisy neighbour{note}: tenant-b at 5 MB/s; tenant-a limited to producer_byte_rate {q:,.0f} B/s; "
      f"broker configs: {configs}\n")
out = []
for r in noisy:
    b, a = r["b"], r["a"]
    if b is None:
        out.append([r["case"], str(r["round"]), "failed"] + [""] * 9)
        continue
    l = b["latency_ms"]
    row = [r["case"], str(r["round"]), f'{b["mb_per_sec"]:.2f}', f'{l["p50"]:.2f}', f'{l["p99"]:.2f}',
           f'{l["p99_9"]:.1f}', f'{l["max"]:.1f}', f'{b["broker"]["cpu_util"]:.2f}']
    if a:
        t = a.get("throttled") or {}
        row += [r["client"], f'{a["mb_per_sec"]:.2f}', f'{a["bytes"] / a["seconds"] / q:.2f}',
                f'{t.get("responses", 0)} / {t.get("seconds", 0):.0f} s']
    else:
        row += ["-", "-", "-", "-"]
    out.append(row)
table(["case", "round", "B MB/s", "B p50 ms", "B p99 ms", "B p99.9 ms", "B max ms", "broker cores",
       "neighbour", "its MB/s", "its B/s / Q", "throttled (responses / s)"], out)

def p99s(case):
    return [r["b"]["latency_ms"]["p99"] for r in noisy if r["case"] == case and r["b"]]
alone, witha = median(p99s("alone")), median(p99s("with-a"))
if alone and witha:
    print(f"\nB's p99 with A / alone (medians of the rounds): {witha:.2f} / {alone:.2f} ms = {witha / alone:.2f} (aim: at most 1.20)")
for c in ("with-free", "with-smooth"):
    v = median(p99s(c))
    if alone and v:
        print(f"B's p99 {c} / alone: {v:.2f} / {alone:.2f} ms = {v / alone:.2f}")
arows = [r["a"] for r in noisy if r["case"] == "with-a" and r["a"]]
if arows:
    byts, secs = sum(a["bytes"] for a in arows), sum(a["seconds"] for a in arows)
    print(f"A's rate over B's runs: {byts / secs:,.0f} B/s of record values = {byts / secs / q:.3f} x Q "
          f"(aim: within 10%; the quota counts the records' framing too, about 1% more)")
print(f"produce responses throttled by the broker: {throttled:.0f}")

cost = [r for r in rows if r["case"] == "cost"]
print(f"\nenforcement cost{note}: flat-out produce of 1 KiB records, acks=1, no compression\n")
out, med = [], {}
for b, what in (("none", "no quota"), ("own", "1e15 B/s on its client id"),
                 ("many", f"that and {nothers} other client ids")):
    rs = [r for r in cost if r["broker"] == b]
    if not rs:
        continue
    cpu = [r["result"]["broker"]["cpu_s_per_gib"] for r in rs]
    mb = [r["result"]["mb_per_sec"] for r in rs]
    # Produce requests per GiB: the broker's counter is cumulative over its runs.
    reqs, prev = [], 0
    for r in rs:
        reqs.append((r["produce_requests"] - prev) / (r["result"]["bytes"] / 2**30))
        prev = r["produce_requests"]
    med[b] = median(cpu)
    out.append([b, what, " ".join(f"{c:.3f}" for c in cpu), f"{med[b]:.3f}", f"{median(mb):.1f}",
                f"{median(reqs):,.0f}", " ".join(f'{r["sensors"]:.0f}' for r in rs)])
table(["broker", "quotas", "broker CPU-s/GiB, each run", "median", "MB/s (median)", "Produce requests/GiB",
       "produce sensors"], out, left=3)
for b in ("own", "many"):
    if med.get("none") and med.get(b):
        print(f"{b} / none (medians): {med[b] / med['none']:.3f}")

bad = False
errs = [(r["case"], r["round"]) for r in noisy for x in (r["b"], r["a"]) if x and x["errors"]]
errs += [("cost", r["broker"], r["round"]) for r in cost if r["result"]["errors"]]
print("\nerrors:", errs if errs else "none")
bad = bool(errs)
for r in cost:
    want = r["broker"] != "none"
    if (r["sensors"] > 0) != want:
        print(f'cost on {r["broker"]}: {r["sensors"]:.0f} produce sensors after the run; the case did not measure what it says',
              file=sys.stderr)
        bad = True
if not quick and throttled <= 0:
    print("tenant-a was never throttled: the run did not measure the quota", file=sys.stderr)
    bad = True
sys.exit(1 if bad else 0)
PY
if [ "$FAILED" -ne 0 ]; then
	echo "bench-quotas.sh: $FAILED run(s) failed" >&2
	exit 1
fi
echo "bench-quotas.sh: all runs passed"
