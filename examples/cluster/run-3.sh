#!/usr/bin/env bash
# run-3.sh: a three-broker Sluice cluster on 127.0.0.1, for trying the cluster out.
#
#   run-3.sh DIR BASEPORT          start brokers 1-3 in the background, return once all answer
#   run-3.sh DIR BASEPORT N        (re)start broker N alone on its old data (N > 3: a
#                                  broker that is not a raft voter, e.g. a fourth one)
#   run-3.sh DIR BASEPORT stop     stop every broker of DIR (SIGTERM, SIGKILL after 30s)
#   run-3.sh DIR BASEPORT status   print each broker's pid and whether it answers
#
# Broker n (1-9) uses:
#   client (Kafka) port   BASEPORT+n-1        e.g. 19092, 19093, 19094
#   raft/controller port  BASEPORT+10+n-1     e.g. 19102, 19103, 19104
#   admin (HTTP) port     BASEPORT+20+n-1     e.g. 19112, 19113, 19114
# so two clusters run side by side with base ports 30 apart. Files under DIR:
#   DIR/n/      the broker's data (metadata raft log, partitions)
#   DIR/n.yaml  its config, written when absent (edit it, or delete it to regenerate)
#   DIR/n.pid   its pid while it runs
#   DIR/n.log   its log (appended to across restarts)
#
# The binary is $SLUICE_BIN when set, else DIR/sluice, built once from this repository
# with `go build ./cmd/sluice`. RUN3_TIMEOUT (seconds, default 60) bounds the wait for
# the brokers to answer GET /readyz on their admin port.
set -euo pipefail

usage() {
	echo "usage: $0 DIR BASEPORT [N|stop|status]" >&2
	exit 2
}

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	usage
fi
dir=$1
base=$2
action=${3:-all}
case $base in
'' | *[!0-9]*)
	echo "$0: BASEPORT must be a number, got '$base'" >&2
	exit 2
	;;
*) ;;
esac
if [ "$base" -lt 1024 ] || [ "$base" -gt 65500 ]; then
	echo "$0: BASEPORT must be in 1024..65500 (broker ports go up to BASEPORT+28)" >&2
	exit 2
fi
timeout_s=${RUN3_TIMEOUT:-60}
voters_n=3 # brokers 1..voters_n are the raft voters (combined broker + controller)

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

client_port() { echo $((base + $1 - 1)); }
raft_port() { echo $((base + 10 + $1 - 1)); }
admin_port() { echo $((base + 20 + $1 - 1)); }

# binary prints the path of the broker binary, building it on first use.
binary() {
	if [ -n "${SLUICE_BIN:-}" ]; then
		[ -x "$SLUICE_BIN" ] || {
			echo "$0: SLUICE_BIN=$SLUICE_BIN is not an executable" >&2
			exit 1
		}
		echo "$SLUICE_BIN"
		return
	fi
	if [ ! -x "$dir/sluice" ]; then
		local repo
		repo=$(cd "$(dirname "$0")/../.." && pwd)
		echo "building $dir/sluice from $repo ..." >&2
		(cd "$repo" && go build -o "$dir/sluice" ./cmd/sluice) >&2
	fi
	echo "$dir/sluice"
}

# write_config N writes DIR/N.yaml unless it exists.
write_config() {
	local n=$1 f="$dir/$1.yaml" voters="" i
	[ -e "$f" ] && return
	for i in $(seq 1 "$voters_n"); do
		voters="$voters${voters:+, }\"$i@127.0.0.1:$(raft_port "$i")\""
	done
	cat >"$f" <<EOF
# Broker $n of the cluster started by examples/cluster/run-3.sh (base port $base).
node_id: $n
data_dir: $dir/$n
listeners: [{name: PLAINTEXT, address: 127.0.0.1:$(client_port "$n")}]
admin_listen: 127.0.0.1:$(admin_port "$n")
configs:
  # Three copies of what the cluster does not say otherwise: topics created without a
  # replication factor and the internal topics. Durable topics also want
  # min.insync.replicas=2 (per topic: a cluster-wide 2 would refuse acks=all on RF 1).
  default.replication.factor: "3"
  offsets.topic.replication.factor: "3"
  transaction.state.log.replication.factor: "3"
  transaction.state.log.min.isr: "2"
modules:
  metadata:
    use: raft
    # Brokers 1-$voters_n are the raft voters; a broker not listed follows the log.
    voters: [$voters]
    raft_listen: 127.0.0.1:$(raft_port "$n")
EOF
}

# alive PID: the process exists and is not a zombie (an init that does not reap may
# leave a killed broker as one, and kill -0 still succeeds on it).
alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0 # no /proc: trust kill -0
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# pid_of N prints broker N's pid if it is running.
pid_of() {
	local f="$dir/$1.pid" pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	if [ -z "$pid" ] || ! alive "$pid"; then
		return 1
	fi
	echo "$pid"
}

ready() {
	curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$(admin_port "$1")/readyz" 2>/dev/null
}

start_one() {
	local n=$1 bin pid
	if pid=$(pid_of "$n"); then
		echo "$0: broker $n is already running (pid $pid); stop it first" >&2
		exit 1
	fi
	bin=$(binary)
	write_config "$n"
	mkdir -p "$dir/$n"
	echo "----- $(date -u +%FT%TZ) run-3.sh: starting broker $n" >>"$dir/$n.log"
	# Detached from this shell: stdin from /dev/null, output to the log, immune to hangups.
	nohup "$bin" serve --config "$dir/$n.yaml" </dev/null >>"$dir/$n.log" 2>&1 &
	echo $! >"$dir/$n.pid"
}

# wait_ready N... polls /readyz of each broker until all answer, a broker exits, or the
# timeout passes.
wait_ready() {
	local deadline=$((SECONDS + timeout_s)) n pending
	while :; do
		pending=""
		for n in "$@"; do
			if ! pid_of "$n" >/dev/null; then
				echo "$0: broker $n exited before it was ready; last lines of $dir/$n.log:" >&2
				tail -n 30 "$dir/$n.log" >&2
				exit 1
			fi
			ready "$n" || pending="$pending $n"
		done
		[ -z "$pending" ] && return 0
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "$0: broker(s)$pending not ready after ${timeout_s}s" >&2
			for n in $pending; do
				echo "--- last lines of $dir/$n.log:" >&2
				tail -n 30 "$dir/$n.log" >&2
			done
			echo "$0: the brokers keep running; stop them with: $0 $dir $base stop" >&2
			exit 1
		fi
		sleep 0.2
	done
}

# stop_all sends SIGTERM to every broker of DIR at once (stopped one by one, the last
# voter would wait in vain for a controller to move its leaderships away), waits up to
# 30s for them to exit, and SIGKILLs the ones still running.
stop_all() {
	local f n pid i pids="" names="" left
	for f in "$dir"/*.pid; do
		[ -e "$f" ] || continue
		n=$(basename "$f" .pid)
		if pid=$(pid_of "$n"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids="$pids $pid"
			names="$names $n:$pid"
		fi
		rm -f "$f"
	done
	for i in $(seq 1 150); do
		left=""
		for pid in $pids; do
			if alive "$pid"; then left="$left $pid"; fi
		done
		[ -z "$left" ] && break
		if [ "$i" -eq 150 ]; then
			echo "broker pid(s)$left still running 30s after SIGTERM; killing them" >&2
			for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
		fi
		sleep 0.2
	done
	for n in $names; do
		echo "stopped broker ${n%%:*} (pid ${n#*:})"
	done
}

case $action in
all)
	for n in 1 2 3; do start_one "$n"; done
	wait_ready 1 2 3
	for n in 1 2 3; do
		echo "broker $n: pid $(cat "$dir/$n.pid"), kafka 127.0.0.1:$(client_port "$n"), admin 127.0.0.1:$(admin_port "$n")"
	done
	;;
[1-9])
	start_one "$action"
	wait_ready "$action"
	echo "broker $action: pid $(cat "$dir/$action.pid"), kafka 127.0.0.1:$(client_port "$action"), admin 127.0.0.1:$(admin_port "$action")"
	;;
stop)
	stop_all
	;;
status)
	for f in "$dir"/*.yaml; do
		[ -e "$f" ] || continue
		n=$(basename "$f" .yaml)
		if pid=$(pid_of "$n"); then
			if ready "$n"; then s=ready; else s="not ready"; fi
			echo "broker $n: pid $pid, $s, kafka 127.0.0.1:$(client_port "$n")"
		else
			echo "broker $n: not running"
		fi
	done
	;;
*) usage ;;
esac
