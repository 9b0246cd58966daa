package interop

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procAttr puts a child in its own process group and kills it if the test binary dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup SIGKILLs the process group led by pid (children of a child included).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// termGroup sends SIGTERM to the process group led by pid.
func termGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
}

// groupAlive reports whether any process of the group led by pid is still running
// (zombies, which an init that does not reap may leave, count as gone).
func groupAlive(pid int) bool {
	if syscall.Kill(-pid, 0) != nil {
		return false
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[2] != strconv.Itoa(pid) {
			continue
		}
		if f[0] != "Z" {
			return true
		}
	}
	return false
}
