# shellcheck shell=bash
# scripts/lib/bench-args.sh - the command line every bench script takes, sourced before
# anything else (it needs no working directory):
#
#   bench_args HELP_LAST "$@"   QUICK=1 for --quick, 0 for nothing; -h/--help prints the
#                               script's header comment (lines 2 to HELP_LAST) and exits
#                               0; anything else, or more than one argument, exits 2.
#   bench_need WHY CMD...       exits 1 unless every CMD is installed, saying what for.

bench_args() {
	local help=$1 name
	name=$(basename "$0")
	shift
	# shellcheck disable=SC2034 # read by the script that sources this
	QUICK=0
	case "${1:-}" in
	--quick) QUICK=1 ;;
	"") ;;
	-h | --help)
		sed -n "2,${help}p" "$0"
		exit 0
		;;
	*)
		echo "$name: unknown argument ${1} (want --quick or nothing)" >&2
		exit 2
		;;
	esac
	if [ $# -gt 1 ]; then
		echo "$name: too many arguments" >&2
		exit 2
	fi
}

bench_need() {
	local why=$1 c
	shift
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || {
			echo "$(basename "$0"): $c is needed ($why)" >&2
			exit 1
		}
	done
}
