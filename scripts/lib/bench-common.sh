# scripts/lib/bench-common.sh - what scripts/bench.sh and scripts/bench-compaction.sh
# share: a temp dir, the processes they started stopped on exit, log lines, and
# waiting for a process's ready line. Sourced, not run. Before sourcing, set:
#   BENCH_NAME   the script's name, for messages
#   BENCH_KEEP   the files (globs under the temp dir) copied to $SLUICE_BENCH_KEEP at exit
# After sourcing: $WORK is the temp dir (removed at exit), PIDS lists processes to stop.

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/${BENCH_NAME%.sh}.XXXXXX")
PIDS=()

# cleanup stops every process in PIDS (TERM, then KILL after 10 s each), keeps the
# results if asked, removes $WORK and exits with the script's status.
cleanup() {
	local rc=$? p g
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -n "${SLUICE_BENCH_KEEP:-}" ]; then
		mkdir -p "$SLUICE_BENCH_KEEP"
		for g in $BENCH_KEEP; do
			# shellcheck disable=SC2086 # the glob is meant to expand
			cp -r "$WORK"/$g "$SLUICE_BENCH_KEEP"/ 2>/dev/null || true
		done
		echo "$BENCH_NAME: results and logs kept in $SLUICE_BENCH_KEEP" >&2
	fi
	rm -rf "$WORK"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf '==> %s\n' "$*" >&2; }

# wait_line FILE PATTERN PID: wait (30 s at most) for a line matching PATTERN in FILE,
# print it; fail if the process exits first.
wait_line() {
	local file=$1 pat=$2 pid=$3 line
	for _ in $(seq 300); do
		if line=$(grep -m1 -E "$pat" "$file" 2>/dev/null); then
			printf '%s\n' "$line"
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "$BENCH_NAME: process $pid exited before it was ready; its log:" >&2
			cat "$file" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "$BENCH_NAME: process $pid not ready after 30 s; its log:" >&2
	cat "$file" >&2
	return 1
}
