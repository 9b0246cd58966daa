// Package assignorpb is the generated Go code of the assignor plugin
// protocol (assignor.proto, package sluice.assignor.v1). Plugin authors do
// not use it: the assignor package converts to and from its own types.
package assignorpb

//go:generate sh ../../../scripts/gen-proto.sh
