// Package image is the pure half of the metadata module: the typed entries of the
// metadata log (records.go), the State they build (state.go: the published
// kernel.Image plus what the image does not show), the snapshot codec (snapshot.go),
// and ApplyEntry, the whole of the raft FSM's Apply but for publishing. It imports no
// raft, reads no clock and no randomness, so it is tested without raft and every broker
// computes the same State from the same log.
//
// The byte layouts of entries and snapshots, the record types and how versions are
// bumped are drawn in the metadata package's doc.go (modules/metadata/doc.go), next to
// the log they describe.
//
// # Invariants
//
//   - A State is immutable once returned: Apply returns a new State that shares what
//     it did not change (copy-on-write of the maps it edits).
//   - Apply is a pure function of the State and the entry; a rejected entry still
//     yields a new State, equal but for Image.Version.
//   - NextProducerID only grows.
//   - Record type numbers and the snapshot format bytes are frozen.
//
// # Concurrency
//
// None: the package has no locks and no goroutines. A State may be read from any
// number of goroutines; the metadata module's hub publishes it with an atomic pointer.
package image
