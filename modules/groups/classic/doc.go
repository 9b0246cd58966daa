// Package classic is the membership state machine of a classic consumer
// group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), as pure logic: no
// network, no goroutines, no clock of its own. The group coordinator's
// handlers decode a request, call the Group and encode what comes back.
//
// Usage sketch (a handler):
//
//	g := classic.New("my-group", classic.Config{}, time.Now())
//	ch := g.Join(req, classic.Client{ID: clientID, Host: host}, time.Now())
//	select {
//	case resp := <-ch: // write resp
//	case <-ctx.Done():  // connection gone; the response is dropped later
//	}
//
// The coordinator owns the clock: it calls g.Tick(time.Now()) when
// g.NextDeadline() passes (one timer per group, or a sweep), and every
// method also fires the timers due at the time it is given. Tests pass a
// fake time and never sleep.
//
// # States
//
//	        ┌──────────────────────── join ends, nobody rejoined ───────────┐
//	        ▼                                                               │
//	      Empty ── first member added (initial delay) ──► PreparingRebalance
//	                                                        │     ▲
//	              join ends: all rejoined or rebalance      │     │ member added, left or
//	              timeout (non-rejoined dynamic members     │     │ expired; protocols
//	              dropped), generation++, leader chosen     │     │ changed; leader rejoined;
//	                                                        ▼     │ a member missed the
//	                                             CompletingRebalance sync deadline
//	                                                        │     ▲
//	                                     leader's SyncGroup │     │ (same causes, from Stable)
//	                                                        ▼     │
//	                                                      Stable ─┘
//
//	any state ── MarkDead(err): group deleted or coordinator moved ──► Dead (final)
//
// Join phase: a join completes when every member has a waiting JoinGroup and
// no KIP-394 pending member is outstanding, or when the largest rebalance
// timeout among members passes. The first join into an Empty group instead
// waits group.initial.rebalance.delay.ms, extended by the same delay while
// new members keep arriving, up to the rebalance timeout in total.
//
// KIP-394: a v4+ join without a member id gets MEMBER_ID_REQUIRED and a
// generated id, kept as pending for the session timeout. KIP-345: a join
// carrying a known group.instance.id and no member id replaces the old
// member id (which is fenced); in Stable with unchanged protocols it gets
// the current generation and keeps its assignment without a rebalance.
//
// Sync phase: the leader's SyncGroup assigns every member (an unnamed member
// gets an empty assignment) and makes the group Stable; followers that
// synced earlier are answered then. Members that got the join response but
// do not sync within the rebalance timeout are removed and a new rebalance
// starts, so a leader that vanishes does not wedge the group.
//
// Server-side assignment (Config.Server, ServerAssigner): when the coordinator wants
// to assign a generation itself, a join ending makes every member a follower (empty
// leader id and member list) told its own first protocol, members without a
// protocol in common are admitted, the leader's SyncGroup assignments are ignored,
// and Assign installs the coordinator's answer (Stable, waiting syncs answered). If
// no Assign comes within the rebalance timeout, waiting syncs get
// REBALANCE_IN_PROGRESS. Assign may ask for a follow-up rebalance once every member
// has synced (partitions withheld from cooperative members until their owners
// revoke them).
//
// Persistence: Snapshot returns what Kafka's group metadata record holds and
// Restore builds a group from it (Stable with its members, assignments and static
// members, every session starting at the restore; or Empty at its generation).
// Only Stable and Empty snapshots are meant to be persisted; see Snapshot. Revision
// tells the coordinator when a snapshot may have changed. Not here: the record
// format (groups/offsets), offsets, and the network handlers. Not coordinator-specific errors either:
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and INVALID_GROUP_ID are the
// handler's to answer before it reaches a Group.
//
// # Invariants
//
//   - The generation only grows; it grows by one at the end of every join phase.
//   - Stable and CompletingRebalance groups have a leader that is a member;
//     Empty groups have no members.
//   - Each channel returned by Join or Sync receives exactly one response
//     and never blocks the sender (buffer of one).
//   - In Stable, every member's assignment is from the current generation
//     (assignments are cleared when a rebalance starts).
//   - Members plus pending members never exceed Config.MaxSize, one member's
//     protocol metadata never exceeds Config.MaxMetadataBytes and one
//     assignment never exceeds Config.MaxAssignmentBytes.
//   - Members with a waiting JoinGroup or SyncGroup do not expire by session
//     timeout; the rebalance timeout bounds those waits instead.
//   - Restore(id, cfg, g.Snapshot(), now) of a Stable group is a Stable group at
//     the same generation where the same members' Heartbeat, SyncGroup (returning
//     their assignment) and commits with that generation succeed, with no
//     rebalance; a member not heard from expires one session timeout after now.
//   - Revision grows on every state change and static member replacement.
//
// # Concurrency
//
// A Group guards itself with one mutex; every method takes it for a short,
// non-blocking critical section (responses go into buffered channels), so
// methods may be called from any goroutine. Time passed to methods may go
// back (concurrent callers); the group keeps the latest time it has seen.
// Nothing here starts a goroutine.
package classic
