//go:build linux

package groups

import (
	"os/exec"
	"syscall"
)

// dieWithBroker makes the kernel SIGKILL the plugin process when the broker dies
// (PR_SET_PDEATHSIG), so a SIGKILLed broker leaves no plugin re-parented to init. The
// signal fires when the OS thread that started the process exits, not the process:
// plugins are started from their supervisor goroutine, locked to its thread for the
// plugin's life (supervise).
func dieWithBroker(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
