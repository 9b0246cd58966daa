// Package consumer is the state machine of a KIP-848 consumer group (the
// "consumer" group protocol: ConsumerGroupHeartbeat and ConsumerGroupDescribe,
// whose versions the coordinator's key files list), as pure logic: no network,
// no goroutines, no clock of its own. The group coordinator's handlers decode a request,
// call the Group and encode what comes back.
//
// Usage sketch (a handler):
//
//	g := consumer.New("my-group", consumer.Config{}, time.Now())
//	resp := g.Heartbeat(ctx, req, req.Version, consumer.Client{ID: clientID, Host: host}, topics, time.Now())
//	// write resp
//
// topics is a TopicView of the cluster metadata (names, ids, partition
// counts). The coordinator owns the clock: it calls g.Tick(time.Now()) when
// g.NextDeadline() passes, and every method also fires the timers due at the
// time it is given. Tests pass a fake time and never sleep.
//
// # Group states
//
//	                  member joins (group epoch++)
//	      Empty ───────────────────────────────────────► Assigning
//	        ▲                                             │   ▲
//	        │ last member leaves,                target   │   │ member joins, leaves or is
//	        │ is fenced or expires        computed at the │   │ fenced; a subscription changes;
//	        │ (from any state)                group epoch │   │ subscribed topics' metadata
//	        │                                             ▼   │ changes (group epoch++)
//	     (any) ◄──────────────────────────────────── Reconciling
//	                                                      │   ▲
//	                        every member at the target    │   │ (same causes, from Stable)
//	                        epoch                         ▼   │
//	                                                    Stable
//
//	any state ── MarkDead(err): group deleted or coordinator moved ──► Dead (final)
//
// The state is derived, as Kafka derives it: Empty without members,
// Assigning while the group epoch is ahead of the target assignment epoch,
// Reconciling while some member's epoch differs from the target epoch (a
// static member away with epoch -2 counts), Stable otherwise.
//
// # Epochs and the target assignment
//
// The group epoch grows by one on every change that needs a new assignment:
// a member joins or is removed (leave, session timeout, rebalance timeout),
// a member's subscription (topic names, regex), rack or preferred server
// assignor changes, or the metadata of a subscribed topic changes (created,
// deleted, recreated with a new id, partitions added). Metadata is checked on
// every heartbeat by looking up each subscribed topic in the TopicView and
// comparing with what the group saw at the last bump. Topics that do not
// exist are not assigned and are looked up again on each heartbeat.
//
// A heartbeat that finds the group epoch ahead of the target epoch runs the
// assignor: the group's configured one (GroupAssignors: the group config
// sluice.consumer.assignor) when set, whatever the members ask for, so an
// operator's choice holds with clients that always name one (franz-go names
// uniform or range); else the one most members ask for (ServerAssignor; ties go
// to the one configured first); else Config.Assignors[0]. A change of the
// choice or its reason is reported through Config.OnAssignorChosen. Each member's previous target
// is its Current, so assignments are sticky. If the assignor fails, panics
// or returns an assignment assignor.Check rejects, the previous target stays,
// the target epoch does not move, LastAssignorError says why, and the next
// heartbeat tries again.
//
// Racks: each member's RackId is its assignor.Member.Rack. Assignors that are
// RackUsers also get each partition's replica racks (Topic.PartitionRacks)
// when the TopicView is a TopicRacks. The default uniform assignor is one: it
// gives members partitions with a replica in their rack where balance and
// stickiness allow (KIP-881's rack awareness, on the server); range ignores
// racks and is not asked for them. A member's rack change bumps the group
// epoch; a change of the replica racks alone does not.
//
// Regex subscriptions (v1+) use Go's regexp, the RE2 dialect Kafka's RE2J
// also speaks, and must match a whole topic name. Internal topics
// (__consumer_offsets, __transaction_state) are matched like any other, as
// Kafka's coordinator does: a client that does not want them says so in its
// pattern. A new regex is resolved at once; all are
// resolved again every Config.RegexRefreshInterval (a heartbeat does it), so
// new topics are picked up.
//
// # Member reconciliation
//
// Each member has an epoch, its previous epoch, its assigned partitions
// (what it may use: exactly what the last Assignment it was sent lists) and
// partitions pending revocation. Its heartbeat moves it towards its target
// as Kafka's CurrentAssignmentBuilder does:
//
//	STABLE ── target epoch moved, partitions to revoke ──► UNREVOKED_PARTITIONS
//	   │  ▲                                                  │ owned list no longer has them
//	   │  └──────── all target partitions obtained ──────────┤ (or rebalance timeout: fenced)
//	   │                                                     ▼
//	   └── target epoch moved, some partitions ──► UNRELEASED_PARTITIONS
//	       still held by others                     (picks them up as they are released)
//
// A member keeps its epoch while it must revoke; it moves to the target
// epoch (and gets the new partitions nobody else holds) only once its
// heartbeat's owned list (TopicPartitions) no longer contains the revoked
// ones. A heartbeat without an owned list acknowledges nothing. A member
// that does not revoke within its rebalance timeout is removed. The
// response carries the Assignment when the member's assigned partitions
// changed in this heartbeat or the request was a full one (epoch 0, or
// rebalance timeout, subscription and owned list all present); it is null
// otherwise.
//
// # Membership rules
//
//   - Epoch 0 joins. v0: an empty member id makes the coordinator generate
//     one. v1 (KIP-1082): the client generates it; empty is INVALID_REQUEST.
//     A join must carry RebalanceTimeoutMillis, an empty non-null
//     TopicPartitions and SubscribedTopicNames or SubscribedTopicRegex
//     (non-null; empty means subscribed to nothing). A known member id
//     joining again is re-admitted in place: it keeps its epoch and
//     assignment, which the response re-delivers, and since it owns nothing
//     now its pending revocations are done. (franz-go relies on this to
//     recover from FENCED_MEMBER_EPOCH and lost responses without a new
//     member id. Kafka 4.x instead fences such a join unless the member's
//     previous epoch is 0, and answers a static member re-joining with its
//     own member id UNRELEASED_INSTANCE_ID unless it left with -2; here
//     both are re-admitted in place.)
//   - Epoch -1 leaves: the member is removed. Epoch -2 (needs an instance
//     id): a static member leaves for now; it keeps its assignment until its
//     session timeout, and a join with the same instance id (and any member
//     id) takes it over. A join with the instance id of a member that has
//     not left is UNRELEASED_INSTANCE_ID; a heartbeat or leave naming an
//     instance id held by another member id is FENCED_INSTANCE_ID.
//   - Any other epoch must be the member's current one, or its previous one
//     with an owned list within its assignment (the response moving it on
//     may have been lost); else FENCED_MEMBER_EPOCH. An unknown member id is
//     UNKNOWN_MEMBER_ID.
//   - New members beyond Config.MaxSize get GROUP_MAX_SIZE_REACHED; an
//     unknown ServerAssignor UNSUPPORTED_ASSIGNOR; a bad or too long regex
//     INVALID_REGULAR_EXPRESSION; too many subscribed or owned topics
//     INVALID_REQUEST. Negative partition ids and unknown topic ids in owned
//     lists are ignored.
//
// ValidateCommit and ValidateFetch check OffsetCommit / OffsetFetch member
// epochs (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) as Kafka does.
//
// # Classic members (classic.go)
//
// Members of classic-protocol clients (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
// live in the same group, as in Kafka 4: JoinClassic, SyncClassic, HeartbeatClassic
// and LeaveClassic. Their protocol type must be "consumer"; the subscription (topics,
// owned partitions, rack) comes from their first protocol's ConsumerMemberMetadata,
// and the group's server-side assignor assigns them with everyone else (they name
// no ServerAssignor). Each is a follower: JoinGroup answers at once with an empty
// leader and the member's first protocol, and SyncGroup with the partitions its join
// computed, as a ConsumerMemberAssignment.
//
// A classic client can only change its partitions by rejoining, so its
// reconciliation happens at its JoinGroup (reconcileClassic): what it still owns (for
// a cooperative client the owned partitions its subscription lists, for an eager one
// nothing) is kept where the target wants it; the target's partitions nobody holds
// are added; the rest of what it owns stays pending revocation, still counted as its
// own, until its next join shows it gave them up (a cooperative client rejoins
// after revoking). Its generation is its member epoch, set to the target epoch at
// each join. Its heartbeats answer REBALANCE_IN_PROGRESS while it must rejoin to
// move on (partitions to give up, or free partitions of its target to take); a
// member told so, or holding partitions pending revocation, must rejoin within its
// rebalance timeout or is removed. Its own session timeout (from its JoinGroup)
// replaces the group's. Commits are checked against its generation, with
// ILLEGAL_GENERATION (which classic clients rejoin on) for a stale one.
//
// Membership: a JoinGroup without a member id is a new member (the coordinator names
// it; only when the caller admits new classic members, else
// INCONSISTENT_GROUP_PROTOCOL), a static one (instance id) replaces the member
// holding its instance id and keeps its partitions; a consumer-protocol join with the
// instance id of a classic member takes it over too. Classic ids are unknown to
// ConsumerGroupHeartbeat and the other way round.
//
// Migration (the coordinator applies group.consumer.migration.policy): FromClassic
// builds a consumer group from a classic group's Stable generation (members become
// classic members at the generation as epoch, their assignments their targets),
// ToClassic gives back the members of a group whose members are all classic, and
// Protocols counts each kind.
//
// # Persistence
//
// TakeChanges reports what changed since the last call (the group and target
// epochs, the members a heartbeat or an expiry touched, the whole target when it
// was recomputed, members that left); the coordinator writes them as Kafka's
// consumer group records before answering. Snapshot is the whole state and Restore
// rebuilds a group from it: member epochs, states, assigned and pending partitions
// and targets come back; sessions and revocation timeouts restart at the restore;
// regexes are resolved again; and a metadata hash that differs from the topics'
// current one bumps the group epoch at the next heartbeat.
//
// Not here: writing the records to __consumer_offsets, the network
// handlers, the migration policy, the replica racks themselves (the coordinator's TopicRacks), a new
// assignment when only they change (KIP-1101), and
// coordinator-level errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, authorization).
//
// # Invariants
//
//   - The group epoch only grows. Every member epoch is <= the target
//     epoch <= the group epoch (a static member away has -2, a member that
//     has just joined 0).
//   - A partition is assigned or pending revocation to at most one member:
//     it is given to a new owner only once the old one has acknowledged
//     revoking it (or was removed). So members following the protocol never
//     own a partition at the same time.
//   - The target assignment passed assignor.Check for the members and
//     topics of the epoch it was computed at; removed members are dropped
//     from it.
//   - Every member has a session deadline; a member in
//     UNREVOKED_PARTITIONS also has a revocation deadline.
//   - A refused heartbeat changes nothing but the clock (and the timers it fires).
//
// # Concurrency
//
// A Group guards itself with one mutex, so methods may be called from any
// goroutine. Heartbeat holds it while the assignor runs (bounded by ctx);
// everything else is short. TopicView is called with the lock held. Time
// passed to methods may go back (concurrent callers); the group keeps the
// latest time it has seen. Nothing here starts a goroutine.
package consumer
