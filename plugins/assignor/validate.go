package assignor

import (
	"errors"

	groupsassignor "github.com/sluicehq/sluice/modules/groups/assignor"
)

// ErrInvalidInput is what an assignor's error wraps when its Input breaks the
// rules listed under Input (duplicate member ids, inconsistent topics, ...).
// The host treats such an error as its own bug, not the plugin's.
var ErrInvalidInput = groupsassignor.ErrInvalidInput

// ErrInvalidAssignment is what groupsassignor.Check's error wraps when an
// assignment breaks the invariants; the host rejects such an answer.
var ErrInvalidAssignment = groupsassignor.ErrInvalidAssignment

// Validate returns an error wrapping ErrInvalidInput if in breaks the rules
// listed under Input, and nil otherwise. Assignors call it first, as the
// built-ins do.
func Validate(in Input) error {
	if err := groupsassignor.Check(in, nil); errors.Is(err, groupsassignor.ErrInvalidInput) {
		return err
	}
	return nil
}

// Check reports whether out is a valid assignment for in; it is
// groupsassignor.Check, what the host runs on every plugin answer.
func Check(in Input, out Assignment) error { return groupsassignor.Check(in, out) }

// Builtin returns the built-in assignor called name ("uniform" or "range"),
// or nil; plugins may delegate to it, e.g. as a fallback.
func Builtin(name string) Assignor { return groupsassignor.Builtin(name) }
