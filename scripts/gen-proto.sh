#!/bin/sh
# Regenerates the Go code of the assignor plugin protocol
# (plugins/assignor/proto/*.pb.go) from plugins/assignor/proto/assignor.proto
# with pinned generator versions. Needs protoc (Debian/Ubuntu:
# apt-get install -y protobuf-compiler) and Go; the plugins are installed
# into a cache directory, not into your GOBIN.
#
#   scripts/gen-proto.sh            # or: go generate ./plugins/assignor/proto
#
# SLUICE_PROTO_OUT=DIR writes the generated files to DIR instead (scripts/test.sh does,
# to check that the committed ones are what the pinned generators write).
set -eu

PROTOC_GEN_GO_VERSION=v1.36.12     # google.golang.org/protobuf, = plugins/assignor/go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1  # google.golang.org/grpc/cmd/protoc-gen-go-grpc

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${SLUICE_PROTO_BIN:-"$(go env GOCACHE)/sluice-proto-tools"}
mkdir -p "$bin"

install_tool() { # name module version
	stamp="$bin/$1.$3"
	if [ ! -x "$bin/$1" ] || [ ! -e "$stamp" ]; then
		GOBIN="$bin" GOFLAGS=-mod=mod go install "$2@$3"
		rm -f "$bin/$1".v*
		touch "$stamp"
	fi
}
install_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
install_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"

command -v protoc >/dev/null || { echo "gen-proto: protoc not found (apt-get install -y protobuf-compiler)" >&2; exit 1; }

cd "$root"
out=${SLUICE_PROTO_OUT:-plugins/assignor/proto}
PATH="$bin:$PATH" protoc \
	--proto_path=plugins/assignor/proto \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	plugins/assignor/proto/assignor.proto
gofmt -l "$out"
