package wasm

import (
	"errors"
	"fmt"
)

// ErrInvalidModule is returned (wrapped with the reason) by Engine.Compile for a
// module that is not a transform this host can run.
var ErrInvalidModule = errors.New("invalid transform module")

// ErrClosed is returned by operations on a closed Engine or Program.
var ErrClosed = errors.New("wasm: closed")

// ErrorKind classifies a failed batch.
type ErrorKind int

const (
	// KindTrap: the guest trapped, ran out of memory, exited (proc_exit or
	// returning from _start) or was otherwise ended. The instance is discarded.
	KindTrap ErrorKind = iota + 1
	// KindTimeout: the guest did not complete the batch within Config.Timeout.
	// The instance is discarded.
	KindTimeout
	// KindFailed: the guest failed the batch itself (fail). The instance lives on.
	KindFailed
	// KindMalformed: the guest wrote malformed output, output beyond
	// Config.MaxOutputBytes, to an unknown output, or out of bounds; or the
	// input batch could not be parsed. The instance lives on.
	KindMalformed
	// KindClosed: the pool was closed before the batch completed.
	KindClosed
)

func (k ErrorKind) String() string {
	switch k {
	case KindTrap:
		return "trap"
	case KindTimeout:
		return "timeout"
	case KindFailed:
		return "failed"
	case KindMalformed:
		return "malformed"
	case KindClosed:
		return "closed"
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error is the error of a failed batch.
type Error struct {
	Kind ErrorKind
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "wasm transform: " + e.Kind.String()
	}
	return "wasm transform: " + e.Kind.String() + ": " + e.Msg
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidModule, fmt.Sprintf(format, args...))
}
