// Package share is the membership state machine of a KIP-932 share group
// (ShareGroupHeartbeat, key 76, and ShareGroupDescribe, key 77, v0-1), as
// pure logic: no network, no goroutines, no clock of its own. It is the
// sibling of package consumer (KIP-848), without the revocation protocol: in
// a share group a partition may be consumed by several members at once, the
// broker handing out records under acquisition locks, so nothing has to be
// given up before it is given to someone else.
//
// Usage sketch (a handler):
//
//	g := share.New("my-share-group", share.Config{}, time.Now())
//	resp := g.Heartbeat(req, req.Version, share.Client{ID: clientID, Host: host}, topics, time.Now())
//	// write resp
//	...
//	if !g.IsMember(fetch.MemberID) { /* UNKNOWN_MEMBER_ID */ }
//
// topics is a TopicView (the consumer package's interface) of the cluster
// metadata. The coordinator owns the clock: it calls g.Tick(time.Now()) when
// g.NextDeadline() passes, and Heartbeat and Describe also expire the
// sessions due at the time they are given. Tests pass a fake time and never
// sleep.
//
// # Group states
//
//	         first member joins
//	  Empty ───────────────────────► Stable
//	    ▲                              │
//	    └──────────────────────────────┘
//	      last member leaves or expires
//
//	any state ── MarkDead(err): group deleted or coordinator moved ──► Dead (final)
//
// The state is derived: Dead after MarkDead, Empty without members, Stable
// otherwise. There is no Assigning or Reconciling: a heartbeat that finds
// the target out of date recomputes it and moves its member to it at once.
//
// # Epochs and the target assignment
//
// The group epoch grows by one on every change that needs a new assignment:
// a member joins or is removed (leave, session timeout), a member's
// subscription or rack changes, or the metadata of a subscribed topic
// changes (created, deleted, recreated with a new id, partitions added).
// Metadata is checked on every heartbeat: each subscribed name is looked up
// in the TopicView and compared with what the target was computed against.
// Topics that do not exist are not assigned and are looked up again on the
// next heartbeat.
//
// A heartbeat that finds the group epoch ahead of the target epoch runs
// Assign (the "simple" share assignor; see its comment for the rules) with
// each member's previous target as its previous assignment, so assignments
// are sticky. The target epoch becomes the group epoch. Then the member's
// epoch becomes the target epoch and its assignment its target, in the same
// heartbeat. Other members pick up their new targets at their own next
// heartbeat; until then they keep what they were last sent.
//
// The response carries the member's whole Assignment (topic ids ascending,
// partitions ascending) when it changed in this heartbeat or the request
// joined (epoch 0); it is null otherwise.
//
// # Membership rules
//
//   - The client generates the member id (a UUID's text); an empty or blank
//     one is INVALID_REQUEST. So is a blank RackID, an epoch below -1, a
//     join (epoch 0) with null SubscribedTopicNames (empty is allowed: a
//     member subscribed to nothing), and more than Config.MaxTopics names.
//   - Epoch 0 joins. A known member id joining again (the client lost a
//     response or was fenced) is re-admitted in place: no new group epoch
//     unless its subscription or rack changed, and, as on any heartbeat, it
//     moves to the target; the response re-delivers its whole assignment. A
//     new member beyond Config.MaxSize gets GROUP_MAX_SIZE_REACHED.
//   - Epoch -1 leaves: the member is removed and the response carries epoch
//     -1. An unknown member leaving is UNKNOWN_MEMBER_ID.
//   - Any other epoch must be the member's current one, else
//     FENCED_MEMBER_EPOCH (the client rejoins with epoch 0 and its id). An
//     unknown member id is UNKNOWN_MEMBER_ID.
//   - Null SubscribedTopicNames or RackID after the join mean unchanged. The
//     rack is carried and described; the assignor does not use it.
//
// # Persistence
//
// Snapshot returns the whole state (epochs, target, members with their
// subscriptions, clients, epochs and assignments) and Restore rebuilds a
// group from it. Sessions restart at the restore. No metadata is persisted:
// Restore runs Assign over the restored target and the topics as they are
// now, and if that would change the target (a subscribed topic changed while
// the coordinator was away, a record is missing) it bumps the group epoch,
// so the next heartbeat recomputes the target. Assign returning its own
// output unchanged is what makes this check exact.
//
// Not here: writing records to __consumer_offsets, share-partition state
// (acquisition locks, delivery counts: the share fetch path and the share
// coordinator), InitializeShareGroupState, the network handlers, rack-aware
// assignment, and coordinator-level errors (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID, GROUP_ID_NOT_FOUND,
// authorization).
//
// # Invariants
//
//   - The group epoch only grows. Every member epoch is <= the target epoch
//     <= the group epoch; right after a member's successful heartbeat its
//     epoch equals both and its assignment equals its target.
//   - While the target epoch equals the group epoch, the target assigns
//     every partition of every subscribed topic (as the target last saw the
//     metadata) to at least one member subscribed to it, and nothing else;
//     each subscriber gets at least one partition of the topic; when a topic
//     has at least as many partitions as subscribers, each of its partitions
//     goes to exactly one. Every member has a target entry (possibly empty).
//     (A member's removal bumps the group epoch and drops its target: its
//     partitions are uncovered until the next heartbeat recomputes.)
//   - Subscribers(t, p) is the number of members whose assignment has t/p.
//   - Every member has a session deadline.
//   - A refused heartbeat changes nothing but the clock (and the sessions it
//     expires).
//
// # Concurrency
//
// A Group guards itself with one mutex, so methods may be called from any
// goroutine. Heartbeat holds it while Assign runs (linear in partitions,
// n log n in members per topic); everything else is short. TopicView is
// called with the lock held. Time passed to methods may go back (concurrent
// callers); the group keeps the latest time it has seen. Nothing here starts
// a goroutine.
package share
