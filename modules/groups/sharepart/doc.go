// Package sharepart is the state of one share-partition of a KIP-932 share
// group ("queues for Kafka"): one share group reading one topic-partition, as the
// partition's leader keeps it. Many members of the group read the partition at
// once; each record is acquired by one member at a time, under a lock with a
// deadline, then accepted, released for redelivery, or rejected.
//
// It is pure logic: no network, no goroutines, no clock of its own. The broker's
// ShareFetch and ShareAcknowledge handlers read the log themselves, ask a
// Partition which offsets a member acquires, and apply acknowledgements; the
// broker calls Tick when NextDeadline passes. Every method that takes a time also
// releases the locks due at that time first. Tests pass a fake time and never
// sleep.
//
// Usage sketch (a ShareFetch handler):
//
//	from, ok := p.FetchOffset()
//	if !ok {
//		return nil // nothing to acquire now (all locks taken or window full)
//	}
//	batches := readLog(from, maxBytes) // every batch read; control and aborted ones with Skip
//	got := p.Acquire(memberID, from, batches, maxRecords, true, time.Now())
//	// send the batches that overlap got, with got as AcquiredRecords
//
//	err := p.Acknowledge(memberID, acks, time.Now()) // ErrInvalidRequest → INVALID_REQUEST, ...
//	if v := p.Version(); v != persistedVersion {
//		persist(p.Snapshot()) // share group state; Restore on the next leader
//	}
//	for _, r := range p.TakeArchivedAtLimit() {
//		deadLetter(r) // records delivered DeliveryLimit times without success
//	}
//
// # The window
//
// SPSO (share-partition start offset): every offset below it is done. SPEO (end
// offset): the first offset never added to the window. The in-flight window is
// [SPSO, SPEO); each offset in it has a state and a delivery count (int16, one
// more at every acquisition). The window is kept as runs, maximal ranges of
// offsets with the same state, count, holder and lock deadline, so its memory
// grows with the number of distinct ranges, not offsets:
//
//	done, forgotten │SPSO                                      │SPEO   not read yet
//	────────────────┼──────────┬───────────┬───────┬───────────┼──────────────
//	                │ Acquired │ Available │ Acked │ Acquired  │
//	                │ m1, c=1  │ c=1       │ c=1   │ m2, c=2   │   one run each
//	                │ by 10:30 │           │       │ by 10:31  │
//	                 the first run is never done; SPEO-SPSO ≤ MaxInFlight
//
// # States of one offset
//
//	new offset at SPEO ── Acquire ──────────────────────────┐
//	                                                        ▼
//	Available ──── Acquire: count+1, ─────────────► Acquired(member) ◄──┐
//	    ▲          lock until now+LockDuration       │  │  │  │          │
//	    │                                            │  │  │  └──────────┘ Renew: lock until
//	    └── Release, lock expired, ReleaseMember ────┘  │  │               now+LockDuration
//	        (count < DeliveryLimit)                     │  │
//	                                                    │  │
//	Acknowledged ◄── Accept ────────────────────────────┘  │
//	                                                       │
//	Archived ◄── Reject, Gap; or Release, lock expired, ───┘
//	   ▲         ReleaseMember at count >= DeliveryLimit
//	   │         (reported by TakeArchivedAtLimit)
//	   └── Skip batch, or absent from the log: Available offsets (count
//	       kept) and new ones (count 0), never delivered
//
// Acknowledged and Archived are done: once SPSO reaches them they are forgotten.
// AdvanceStart forgets offsets below the log start whatever their state; Reset
// forgets the whole window.
//
// # Invariants
//
//   - The runs are sorted, non-overlapping and contiguous, and cover exactly
//     [SPSO, SPEO): the first starts at SPSO, each next one right after the
//     previous one, the last ends at SPEO-1; no runs iff SPSO == SPEO.
//   - Adjacent runs differ in state, delivery count, holder or deadline (equal
//     neighbours are merged), so the window costs one run per distinct range.
//   - The first run is never done: SPSO advances over leading Acknowledged and
//     Archived offsets after every change.
//   - A run has a holder and a deadline iff it is Acquired; so no offset is held
//     by two members.
//   - An Available offset's delivery count is below DeliveryLimit, and never
//     negative; Acquire never delivers an offset more than DeliveryLimit times.
//   - At most MaxLocks offsets are Acquired, and SPEO-SPSO <= MaxInFlight, so the
//     runs are bounded even while SPSO is stuck behind one record.
//   - SPSO and SPEO never go back, except by Reset.
//   - Acknowledged is final: an accepted offset is never delivered again.
//   - Version grows, by one per call, exactly when a call changed what Snapshot
//     shows; Restore(cfg, p.Snapshot()) has the same window with every Acquired
//     offset Available at its count (Archived, and reported, if the count
//     reached DeliveryLimit: as if its lock had expired).
//
// Non-obvious:
//   - Acquire archives offsets that its caller's read proved absent from the
//     log (compacted away), those in [from, first batch) and between two
//     batches. That is why it takes from: without it a record compacted away
//     while Available would hold SPSO forever.
//   - Acknowledge is all or nothing, but a lock due at its time expires even
//     when it fails (time passed, as if Tick had run).
//   - The clock never goes back: a time earlier than one already seen counts as
//     the latest seen. A restored partition has seen no time yet.
//   - State values are Kafka's record states (AVAILABLE 0, ACQUIRED 1,
//     ACKNOWLEDGED 2, ARCHIVED 4), so the persister can store them as they are.
//   - Lookups are binary searches over the runs; Tick, ReleaseMember and
//     FetchOffset walk them. Everything is linear in runs at worst.
//
// # Concurrency
//
// A Partition guards itself with one mutex; every method takes it for a short,
// non-blocking critical section, so methods may be called from any goroutine.
// Nothing here starts a goroutine or keeps global state.
package sharepart
