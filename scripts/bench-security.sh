#!/usr/bin/env bash
# scripts/bench-security.sh - what TLS, SASL and ACLs cost (issue 17): the same
# sluice-bench runs against three single-node brokers that differ only in their listener,
#   plain     PLAINTEXT, no authentication
#   tls       SSL (PEM key store; no client certificates)
#   sasl_ssl  SASL_SSL with SCRAM-SHA-512 as the bench user, auth.acl with its ACLs
# then, on sasl_ssl, the e2e case again after 10,000 more ACLs (other principals,
# literal and prefixed) were added: the authorization cost per request.
#
#   ./scripts/bench-security.sh          the full run (a few minutes)
#   ./scripts/bench-security.sh --quick  a tiny version (about 30 s; CI: asserts no
#                                        timings, fails only on errors)
#
# Cases (per broker): p1kn produce 1 KiB records uncompressed, acks=1 (the broker's
# CPU-s/GiB is the figure: TLS encrypts every byte); c1kn consume them back; p100u
# produce 100 B records, acks=1; e2e 1 KiB at 20,000 records/s, acks=all (p99 ms).
# Certificates are made with openssl in the temp dir. Output: a table on stdout; the raw
# JSON lines and logs stay in $SLUICE_BENCH_KEEP if set. The ACLs are made with
# sluice-bench acls. Needs go, python3 (the table), openssl.
set -euo pipefail

# shellcheck source=scripts/lib/bench-args.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench-args.sh"
bench_args 19 "$@"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench_need "the table; openssl for the certificates" python3 openssl

BENCH_NAME=bench-security.sh BENCH_KEEP="results.jsonl *.log"
# shellcheck source=scripts/lib/bench-common.sh
source scripts/lib/bench-common.sh # the cd above made the repo root the working dir

log "build (go build -o $WORK/bin)"
mkdir -p "$WORK/bin"
go build -o "$WORK/bin/sluice" ./cmd/sluice
go build -o "$WORK/bin/sluice-bench" ./cmd/sluice-bench
BENCH="$WORK/bin/sluice-bench"

log "certificates (openssl)"
CERTS="$WORK/certs"
mkdir -p "$CERTS"
(
	cd "$CERTS"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=bench-ca" -keyout ca.key -out ca.pem 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
		-keyout server.key -out server.csr 2>/dev/null
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
	openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
		-extfile san.ext -out server.crt 2>/dev/null
	cat server.key server.crt ca.pem >server.pem
)

declare -A ADDR PID LOG
PASS=bench-secret

# start NAME CONFIG: a broker from CONFIG (YAML) on kernel-chosen ports.
start() {
	local name=$1 config=$2 line
	mkdir -p "$WORK/$name-data"
	printf '%s\n' "$config" >"$WORK/$name.yaml"
	LOG[$name]="$WORK/$name.log"
	"$WORK/bin/sluice" serve --config "$WORK/$name.yaml" --data-dir "$WORK/$name-data" \
		--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"${LOG[$name]}" 2>&1 &
	PID[$name]=$!
	PIDS+=("$!")
	line=$(wait_line "${LOG[$name]}" 'msg="broker started"' "${PID[$name]}")
	ADDR[$name]=$(sed -E 's/.*listeners=\[([^] ]+)\].*/\1/' <<<"$line")
	log "  $name: ${ADDR[$name]} (pid ${PID[$name]})"
}

TLSCONF="  ssl.keystore.location: $CERTS/server.pem
  ssl.truststore.location: $CERTS/ca.pem"
log "start brokers"
start plain "listeners: [{name: PLAINTEXT, address: 127.0.0.1:0}]"
start tls "listeners: [{name: SSL, address: 127.0.0.1:0}]
configs:
$TLSCONF"
start sasl_ssl "listeners: [{name: SASL_SSL, address: 127.0.0.1:0}]
configs:
$TLSCONF
  sasl.enabled.mechanisms: SCRAM-SHA-512
  super.users: User:admin
modules:
  auth: {use: acl, users: [{name: admin, password: $PASS}, {name: bench, password: $PASS}]}"

declare -A SEC
SEC[plain]=""
SEC[tls]="--tls-ca $CERTS/ca.pem"
SEC[sasl_ssl]="--tls-ca $CERTS/ca.pem --sasl-mechanism SCRAM-SHA-512 --sasl-user bench --sasl-password $PASS"

# The bench user's ACLs on sasl_ssl: every topic starting with "sb-" (create, write,
# read, describe) and its consumer groups; admin (a super user) adds the 10,000 later.
ADMIN=(--brokers "${ADDR[sasl_ssl]}" --tls-ca "$CERTS/ca.pem" --sasl-mechanism SCRAM-SHA-512 --sasl-user admin --sasl-password "$PASS")
log "ACLs for the bench user"
"$BENCH" acls "${ADMIN[@]}" --topic sb- --allow-user bench --progress 0 >"$WORK/acls-bench.out"

if [ "$QUICK" = 1 ]; then
	N100=20000 N1K=5000 RATE=2000 E2E_DUR=3s WARMUP=1s NACL=500
else
	N100=1000000 N1K=500000 RATE=20000 E2E_DUR=20s WARMUP=2s NACL=10000
fi
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
FAILED=0

# bench CASE BROKER ARGS...: one sluice-bench run against BROKER with its security flags.
bench() {
	local case=$1 b=$2 out rc=0 line
	shift 2
	log "$case on $b: sluice-bench $*"
	# shellcheck disable=SC2086 # SEC holds several flags
	out=$("$BENCH" "$@" --brokers "${ADDR[$b]}" --broker-pid "${PID[$b]}" --partitions 6 --timeout 5m ${SEC[$b]}) || rc=$?
	line=$(grep -m1 '^{' <<<"$out" || true)
	if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
		echo "bench-security.sh: $case on $b failed (exit $rc):" >&2
		printf '%s\n' "$out" >&2
		FAILED=$((FAILED + 1))
		return 0
	fi
	printf '{"case":"%s","broker":"%s","result":%s}\n' "$case" "$b" "$line" >>"$RESULTS"
}

E2E=(--record-size 1024 --acks all --rate "$RATE" --duration "$E2E_DUR" --warmup "$WARMUP" --progress 10s)
# Case by case, each broker in turn, with the page cache's dirty pages written back
# before each run: a produce run's cost is mostly its writes into the page cache, which
# is dearer once earlier runs left it full of dirty pages, so running one broker's
# cases after another's would charge the later broker for the earlier one's writes.
BROKERS=(plain tls sasl_ssl)
for b in "${BROKERS[@]}"; do
	sync
	bench p1kn "$b" produce --topic sb-p1kn --record-size 1024 --acks 1 --compression none --records "$N1K" --progress 10s
done
for b in "${BROKERS[@]}"; do
	bench c1kn "$b" consume --topic sb-p1kn --progress 10s
done
for b in "${BROKERS[@]}"; do
	sync
	bench p100u "$b" produce --topic sb-p100u --record-size 100 --acks 1 --records "$N100" --progress 10s
done
for b in "${BROKERS[@]}"; do
	sync
	bench e2e "$b" e2e --topic sb-e2e "${E2E[@]}"
done

log "add $NACL ACLs on sasl_ssl"
"$BENCH" acls "${ADMIN[@]}" --topic sb-e2e --count "$NACL" --progress 0 >"$WORK/acls-many.out"
grep -m1 '^{' "$WORK/acls-many.out" >"$WORK/acls-many.json"
sync
bench e2e-acls sasl_ssl e2e --topic sb-e2e "${E2E[@]}"

python3 - "$RESULTS" "$QUICK" "$NACL" "$WORK/acls-many.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
quick, nacl = sys.argv[2] == "1", sys.argv[3]
made = json.load(open(sys.argv[4]))
by = {(r["case"], r["broker"]): r["result"] for r in rows}
def cpu(c, b):
    r = by.get((c, b))
    return r and r.get("broker") and r["broker"]["cpu_s_per_gib"]
def fmt(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"
print(f"\nbench-security.sh{' (--quick: tiny counts, figures mean nothing)' if quick else ''}\n")
print(f"{'case':8} {'figure':24} {'plain':>8} {'tls':>8} {'sasl_ssl':>9} {'tls/plain':>10} {'sasl/plain':>11}")
for c in ("p1kn", "c1kn", "p100u"):
    p, t, s = cpu(c, "plain"), cpu(c, "tls"), cpu(c, "sasl_ssl")
    print(f"{c:8} {'broker CPU-s/GiB':24} {fmt(p):>8} {fmt(t):>8} {fmt(s):>9} "
          f"{fmt(t / p if p and t else None):>10} {fmt(s / p if p and s else None):>11}")
    mb = [by.get((c, b), {}).get("mb_per_sec") for b in ("plain", "tls", "sasl_ssl")]
    print(f"{'':8} {'MB/s':24} {fmt(mb[0], 1):>8} {fmt(mb[1], 1):>8} {fmt(mb[2], 1):>9}")
for c in ("e2e",):
    lat = [by.get((c, b), {}).get("latency_ms") or {} for b in ("plain", "tls", "sasl_ssl")]
    print(f"{c:8} {'p99 ms':24} " + " ".join(f"{fmt(l.get('p99')):>8}" for l in lat))
acl = by.get(("e2e-acls", "sasl_ssl"), {}).get("latency_ms") or {}
base = by.get(("e2e", "sasl_ssl"), {}).get("latency_ms") or {}
print(f"\nsasl_ssl e2e p50/p99/p99.9 ms: {fmt(base.get('p50'))}/{fmt(base.get('p99'))}/{fmt(base.get('p99_9'))} with the bench "
      f"user's ACLs; {fmt(acl.get('p50'))}/{fmt(acl.get('p99'))}/{fmt(acl.get('p99_9'))} with {nacl} more")
print(f"{made['records']} ACLs created in {made['seconds']:.1f} s ({made['records_per_sec']:.0f}/s, "
      f"CreateAcls of 1,000 each), {made['errors']} errors")
if made["errors"]:
    sys.exit(1)
errs = [(r["case"], r["broker"], r["result"]["errors"]) for r in rows if r["result"]["errors"]]
if errs:
    print("errors:", errs)
    sys.exit(1)
PY
if [ "$FAILED" -ne 0 ]; then
	echo "bench-security.sh: $FAILED run(s) failed" >&2
	exit 1
fi
