// Package authztest holds the broker-wide authorization table test: every API key a
// standard broker serves, sent over a real socket with franz-go, against a test-only
// auth module whose Authorizer denies exactly the (operation, resource) pairs a row
// names and records every question it was asked. Each row asserts Kafka's error code
// for the denial, that the denied check was asked, and that nothing changed (no
// record appended, topic created, offset committed, config altered, group or
// transaction state moved). docs/security.md ("What each API checks") is the same
// table in prose; a row added to one belongs in the other.
//
// The package has no non-test code: it exists so the test can see every module
// through internal/testbroker.
//
// # Invariants
//   - Every key the broker claims (kernel.Kernel.Claims, but the kernel's own) has at
//     least one row; the test fails when a module claims a key without one.
//
// # Concurrency
// Rows run one after another against one broker; the recorder's deny set is swapped
// between rows under its mutex, and Authorize (called from every connection
// goroutine) reads it under the same mutex.
package authztest
