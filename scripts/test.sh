#!/usr/bin/env bash
# scripts/test.sh - the one command that installs what the tests need and runs them all.
#
#   ./scripts/test.sh
#
# Steps: install (apt: kcat, python3-confluent-kafka, protobuf-compiler, chromium; npm ci in
# interop/; staticcheck), gofmt, go mod tidy drift and a standalone build of every module,
# generated-proto freshness, go vet, staticcheck, go test -race (every package but
# interop), a short fuzz run of every Fuzz target, then the interop suite (real clients
# against a real broker).
#
# The repository has several Go modules (the broker at the root, sdk-wasm,
# plugins/assignor, bench, interop/rdkafkago), tied together by the committed go.work. Every go step runs in
# every module's directory (the root's ./... does not reach the others, go.work or not),
# in workspace mode as a developer's checkout is; the tidy step also builds each module
# with GOWORK=off, as a user's go get sees it.
# A failing check does not stop the later ones; the summary at the end lists them all and
# the exit status is non-zero if any failed. A failing install stops the run.
#
# Environment:
#   SLUICE_SKIP_INSTALL=1   skip every install step (local iteration)
#   SLUICE_QUICK=1          skip the fuzz runs
#   SLUICE_FUZZTIME=2s      time per fuzz target (41 targets, two at a time, each compiled with
#                           fuzz instrumentation: about 2 minutes on 2 cores; set more
#                           for a deeper local run)
#   SLUICE_INTEROP_BUILDFLAGS   go build flags for the broker the interop suite runs
#                           (default -race; set it empty for a faster run)
#   SLUICE_CLIENT_SUITES=full   run sarama's and kafka-go's own suites whole in the
#                           interop suite (default: their short forms)
#
# Runs as root on Debian 12 (CI: fresh clone, CI=true, no stdin). Keep it under ~20 minutes
# on 2 cores.
set -euo pipefail

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools; 0.8.x supports Go 1.26
FUZZTIME=${SLUICE_FUZZTIME:-2s}
APT_PACKAGES=(kcat python3-confluent-kafka protobuf-compiler openssl curl chromium)

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
export DEBIAN_FRONTEND=noninteractive

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
export PATH="$(go env GOPATH)/bin:$PATH"

T0=$SECONDS
STEPS=()
FAILED=0

log() { printf '\n==> %s\n' "$*"; }

# step NAME CMD... runs CMD in a subshell with errexit on, records its result and time,
# and carries on after a failure.
step() {
	local name=$1 start=$SECONDS rc
	shift
	log "$name"
	set +e
	(set -e; "$@")
	rc=$?
	set -e
	local took=$((SECONDS - start))
	if [ "$rc" -eq 0 ]; then
		STEPS+=("$(printf '[pass] %-34s %4ds' "$name" "$took")")
	else
		STEPS+=("$(printf '[FAIL] %-34s %4ds  (exit %d)' "$name" "$took" "$rc")")
		FAILED=$((FAILED + 1))
	fi
}

skip_step() {
	STEPS+=("$(printf '[skip] %-34s        %s' "$1" "$2")")
}

summary() {
	printf '\n==> summary (%ds in all)\n' "$((SECONDS - T0))"
	printf '  %s\n' "${STEPS[@]}"
	local passed=0 s
	for s in "${STEPS[@]}"; do
		case "$s" in "[pass]"*) passed=$((passed + 1)) ;; esac
	done
	# The plain closing line CI reads: steps passed and failed.
	printf 'steps: %d passed, %d failed\n' "$passed" "$FAILED"
}

# ---- install -----------------------------------------------------------------------

install_apt() {
	local missing=()
	command -v kcat >/dev/null 2>&1 || missing+=(kcat)
	dpkg -s python3-confluent-kafka >/dev/null 2>&1 || missing+=(python3-confluent-kafka)
	command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler) # the proto freshness check
	command -v openssl >/dev/null 2>&1 || missing+=(openssl)          # bench-security.sh's certificates
	command -v curl >/dev/null 2>&1 || missing+=(curl)                # the README's commands
	command -v chromium >/dev/null 2>&1 || missing+=(chromium)        # the console's browser test
	command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)        # cgo: interop/rdkafkago (confluent-kafka-go)
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		missing+=(nodejs npm)
	fi
	if [ "${#missing[@]}" -eq 0 ]; then
		echo "apt: ${APT_PACKAGES[*]} already installed"
		return 0
	fi
	echo "apt: installing ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_npm() {
	cd "$ROOT/interop"
	# The lock file must carry no download addresses (interop/.npmrc sets
	# omit-lockfile-registry-resolved=true when it is regenerated).
	if grep -Eq '"resolved"|://' package-lock.json; then
		echo "interop/package-lock.json records download addresses; regenerate it with npm >= 9 (see interop/.npmrc)" >&2
		return 1
	fi
	npm ci --no-audit --no-fund --loglevel=error
	node -e 'const v = require("kafkajs/package.json").version; console.log("kafkajs " + v)'
}

install_staticcheck() {
	local want=${STATICCHECK_VERSION#v}
	if command -v staticcheck >/dev/null 2>&1 && staticcheck -version 2>/dev/null | grep -q "($want)"; then
		echo "staticcheck $want already installed"
		return 0
	fi
	go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	staticcheck -version
}

install_all() {
	install_apt
	install_npm
	install_staticcheck
}

if [ "${SLUICE_SKIP_INSTALL:-}" = 1 ]; then
	skip_step install "SLUICE_SKIP_INSTALL=1"
else
	step install install_all
	if [ "$FAILED" -gt 0 ]; then
		summary
		echo "install failed; not running the tests" >&2
		exit 1
	fi
fi

# ---- what we run with (information only) -----------------------------------------------

log "versions"
{
	go version
	command -v kcat >/dev/null 2>&1 && kcat -V 2>&1 | grep -m1 '^Version'
	/usr/bin/python3 -c 'import confluent_kafka as c; print("confluent-kafka", c.version()[0], "librdkafka", c.libversion()[0])' 2>/dev/null
	command -v node >/dev/null 2>&1 && echo "node $(node --version), npm $(npm --version)"
	command -v staticcheck >/dev/null 2>&1 && staticcheck -version
	command -v protoc >/dev/null 2>&1 && protoc --version
} || true

# ---- checks ------------------------------------------------------------------------

go_files() {
	find . -name '*.go' -not -path './.git/*' -not -path '*/node_modules/*' -not -path '*/testdata/*' -print0
}

check_gofmt() {
	local out
	out=$(go_files | xargs -0 -r gofmt -l)
	if [ -n "$out" ]; then
		echo "gofmt -l lists files that need formatting (run gofmt -w):"
		echo "$out"
		return 1
	fi
	echo "gofmt: clean"
}

# Go modules in the tree, the root first (nested ones such as an SDK with its own go.mod
# are not matched by the root's ./..., even under a go.work).
go_modules() {
	find . -name go.mod -not -path './.git/*' -not -path '*/node_modules/*' -not -path '*/testdata/*' \
		-printf '%h\n' | sort
}

# in_modules CMD... runs CMD in every module's directory; fails if any run failed.
in_modules() {
	local dir failed=0
	for dir in $(go_modules); do
		[ "$dir" = . ] || echo "--- in module $dir"
		(cd "$dir" && "$@") || failed=1
	done
	return "$failed"
}

# tidy_and_build (in one module's directory): go mod tidy would change nothing (tidy
# ignores go.work: it judges the module alone), and the module builds without go.work, as
# it does for someone who go gets it (its go.mod must replace the repository's other
# modules it needs with their directories).
tidy_and_build() {
	local out
	if ! out=$(go mod tidy -diff) || [ -n "$out" ]; then
		printf '%s\n' "$out"
		echo "go.mod or go.sum of $(pwd) is not tidy: run go mod tidy there" >&2
		return 1
	fi
	GOWORK=off go build ./...
}

# check_proto regenerates the assignor plugin's Go code with the pinned generators
# (scripts/gen-proto.sh) into a temp dir and fails if it differs from what is committed,
# or if the protoc-gen-go pin is not the protobuf version plugins/assignor/go.mod uses.
check_proto() {
	if ! command -v protoc >/dev/null 2>&1; then
		echo "protoc is not installed (apt-get install protobuf-compiler, or run without SLUICE_SKIP_INSTALL=1)" >&2
		return 1
	fi
	local pin mod tmp rc=0 f
	pin=$(sed -n 's/^PROTOC_GEN_GO_VERSION=\(v[^ ]*\).*/\1/p' scripts/gen-proto.sh)
	mod=$(cd plugins/assignor && go list -m -f '{{.Version}}' google.golang.org/protobuf)
	if [ "$pin" != "$mod" ]; then
		echo "scripts/gen-proto.sh pins protoc-gen-go $pin, plugins/assignor/go.mod uses protobuf $mod: make them agree and regenerate" >&2
		rc=1
	fi
	tmp=$(mktemp -d)
	SLUICE_PROTO_OUT="$tmp" sh scripts/gen-proto.sh
	for f in assignor.pb.go assignor_grpc.pb.go; do
		if ! diff -u "plugins/assignor/proto/$f" "$tmp/$f"; then
			echo "plugins/assignor/proto/$f is not what scripts/gen-proto.sh generates from assignor.proto: run it and commit the result" >&2
			rc=1
		fi
	done
	rm -rf "$tmp"
	[ "$rc" -eq 0 ] && echo "generated proto code: fresh"
	return "$rc"
}

check_staticcheck() {
	if ! command -v staticcheck >/dev/null 2>&1; then
		echo "staticcheck is not installed (run without SLUICE_SKIP_INSTALL=1)" >&2
		return 1
	fi
	in_modules staticcheck ./...
}

# Every package except the interop suite, which runs last on its own.
race_tests() {
	local pkgs
	pkgs=$(go list -e ./... | grep -v '/interop$' || true)
	if [ -z "$pkgs" ]; then
		echo "no packages"
		return 0
	fi
	# shellcheck disable=SC2086 # one package per word
	go test -race -count=1 -timeout=12m $pkgs
}

# fuzz_targets prints "DIR NAME" for every Fuzz function in a _test.go file.
fuzz_targets() {
	grep -r --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git -H '^func Fuzz' . |
		sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' |
		sort -u
}

# module_dir DIR prints the directory of the go.mod that DIR belongs to.
module_dir() {
	local d=$1
	while [ "$d" != . ] && [ ! -f "$d/go.mod" ]; do
		d=$(dirname "$d")
	done
	echo "$d"
}

# fuzz_one DIR NAME LOG fuzzes one target for $FUZZTIME with one worker, its output in
# LOG, and prints one status word: ok, flake or fail. Go 1.26's fuzz coordinator can
# fail a run that found nothing with a bare "context deadline exceeded" as -fuzztime
# expires (golang/go issue 75804, fixed in Go 1.27); such a run fuzzed its full time and
# wrote no failing input, so it is a flake, not a failure. A real finding always writes
# a file under testdata/fuzz/<Name>/.
fuzz_one() {
	local dir=$1 name=$2 log=$3 mod rel before after
	mod=$(module_dir "$dir")
	rel=./${dir#"$mod"}
	rel=${rel/#.\/\//./}
	before=$(ls "$dir/testdata/fuzz/$name" 2>/dev/null || true)
	if (cd "$mod" && go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -parallel=1 -timeout=5m "$rel") >"$log" 2>&1; then
		echo ok
		return
	fi
	after=$(ls "$dir/testdata/fuzz/$name" 2>/dev/null || true)
	if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log" &&
		! grep -q 'Failing input written to' "$log"; then
		echo flake
		return
	fi
	echo fail
}

# fuzz_all runs every target for $FUZZTIME, two at a time with one worker each (on two
# cores the compile and link of each target, not the fuzzing, was most of the step),
# and prints each target's output and status in order.
fuzz_all() {
	local targets n=0 failed=0 flaked=0 dir name tmp i status
	targets=$(fuzz_targets)
	if [ -z "$targets" ]; then
		echo "no Fuzz targets found"
		return 0
	fi
	tmp=$(mktemp -d)
	i=0
	while read -r dir name; do
		i=$((i + 1))
		while [ "$(jobs -rp | wc -l)" -ge 2 ]; do
			wait -n || true
		done
		(fuzz_one "$dir" "$name" "$tmp/$i.log" >"$tmp/$i.status") &
	done <<<"$targets"
	wait
	i=0
	while read -r dir name; do
		i=$((i + 1))
		n=$((n + 1))
		echo "--- fuzz $name in $dir ($FUZZTIME)"
		cat "$tmp/$i.log"
		status=$(cat "$tmp/$i.status")
		case $status in
		ok) ;;
		flake)
			echo "--- FLAKE: fuzz $name in $dir: context deadline exceeded at the end of -fuzztime, no failing input (golang/go issue 75804)"
			flaked=$((flaked + 1))
			;;
		*)
			echo "--- FAIL: fuzz $name in $dir (a failing input, if any, is saved under $dir/testdata/fuzz/$name)"
			failed=$((failed + 1))
			;;
		esac
	done <<<"$targets"
	rm -rf "$tmp"
	echo "fuzz: $n target(s), $failed failed, $flaked flaked"
	[ "$failed" -eq 0 ]
}

interop() {
	SLUICE_INTEROP_REQUIRED=1 SLUICE_INTEROP_BUILDFLAGS="${SLUICE_INTEROP_BUILDFLAGS--race}" \
		go test -race -count=1 -v -parallel="${SLUICE_INTEROP_PARALLEL:-3}" -timeout=20m ./interop/
}

step "gofmt -l" check_gofmt
step "go mod tidy -diff, GOWORK=off build" in_modules tidy_and_build
step "generated proto freshness" check_proto
step "go vet ./..." in_modules go vet ./...
step "staticcheck ./..." check_staticcheck
step "go test -race ./... (not interop)" in_modules race_tests
if [ "${SLUICE_QUICK:-}" = 1 ]; then
	skip_step "fuzz" "SLUICE_QUICK=1"
else
	step "fuzz ($FUZZTIME per target)" fuzz_all
fi
step "interop suite" interop
step "scripts/bench.sh --quick" ./scripts/bench.sh --quick
step "scripts/bench-compaction.sh --quick" ./scripts/bench-compaction.sh --quick
step "scripts/bench-security.sh --quick" ./scripts/bench-security.sh --quick
step "scripts/bench-quotas.sh --quick" ./scripts/bench-quotas.sh --quick

summary
[ "$FAILED" -eq 0 ]
