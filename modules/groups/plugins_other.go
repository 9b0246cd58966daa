//go:build !linux

package groups

import "os/exec"

// dieWithBroker: only Linux has a parent-death signal; elsewhere a plugin outlives a
// killed broker until its next handshake-less read fails.
func dieWithBroker(*exec.Cmd) {}
