//go:build !linux

package interop

import "syscall"

func procAttr() *syscall.SysProcAttr { return nil }

func killGroup(int) {}

func termGroup(int) {}

func groupAlive(int) bool { return false }
