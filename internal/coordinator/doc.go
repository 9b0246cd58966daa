// Package coordinator is the skeleton the group and transaction coordinators share.
// Each keeps its state in an internal, compacted topic (__consumer_offsets,
// __transaction_state) and coordinates the keys (group ids, transactional ids) that
// hash to the partitions this broker leads. The skeleton does everything that is not
// the records and the state machine:
//
//   - following leadership: the sweeper (and every lookup) asks kernel.Partitions who
//     leads each partition of the topic, loads a shard for each partition this broker
//     leads and unloads the ones it no longer leads or whose leader epoch changed;
//   - the shard map, partition -> *Shard, one shard per (partition, leader epoch);
//   - the load: a new shard waits until the previous shard of its partition stopped
//     writing, replays the partition's log into its State, then serves; requests
//     that arrive meanwhile wait up to Config.LoadWaitMs, then get
//     COORDINATOR_LOAD_IN_PROGRESS (Load);
//   - the writer: one goroutine per shard appends queued writes to the partition in
//     batches (a transactional write of one producer alone), waits for them to
//     commit and hands them to the State before it answers the writers;
//   - the sweeper: every Config.SweepIntervalMs, leadership and then State.Sweep of
//     every ready shard;
//   - Close and Wait: unload every shard and wait for every goroutine.
//
// A module implements State (Replay, Loaded, Appended, Sweep, Unload) on its shard
// type, which embeds *Shard for the write path:
//
//	type shard struct {
//		*coordinator.Shard
//		txns map[string]*txnMeta // the state machine
//	}
//	m.coord = coordinator.New(cfg, func(sh *coordinator.Shard) *shard { return &shard{Shard: sh} })
//	m.coord.Start()                       // Module.Start
//	s, e := m.coord.Lookup(ctx, id)       // a handler: the loaded shard of id, or the code to answer
//	e = s.Write(ctx, []coordinator.KV{{Key: k, Value: v}}) // nil once committed and applied
//	m.coord.Close(); m.coord.Wait(ctx)    // Module.Stop
//
// # Life of a shard
//
//	Shards.Shard(p), leader at epoch e ─► new Shard (in the map) ─► wait for prev.done
//	  ─► replay from State.ReplayFrom, State.Replay per batch ─► State.Loaded
//	  ─► ready (Load done) ─► writer ─► ctx cancelled (leadership lost, a new epoch,
//	  Drop, Close) ─► queued writes answered NOT_COORDINATOR ─► done closed
//	State.Unload(code) runs once, after ctx is cancelled, whatever stage it reached.
//
// # Invariants
//
//   - One leader epoch, one shard: a lookup that finds the partition led at another
//     epoch (or its load failed) replaces the shard, and the old one is unloaded.
//   - Load after the previous one: a shard replays only after the shard it replaced
//     closed done (its load failed or its writer exited), so two shards never write
//     the same partition's state at once, and the replay sees every record the old
//     writer appended.
//   - Single writer: after its load, only the shard's writer goroutine appends to the
//     partition and calls State.Appended and Waker.Woken, in queue order; before it,
//     only the loader calls State.Replay and State.Loaded. A State therefore has one
//     goroutine changing what it derives from the log at any time.
//   - A write is answered only after its batch is committed (kernel.Partitions.Append
//     waits for the high watermark) and State.Appended returned; a failed append
//     drops the shard (the next lookup loads the partition again from the log), so
//     the state never holds what the log does not. If Appended fails, the records
//     are committed (the write succeeded) but the state missed them: the shard is
//     dropped too and the reload replays them.
//   - Every shard removed from the map is unloaded: by the lookup that replaces it,
//     by Drop, or by Close for those still in the map. Unload runs once per shard.
//
// # Concurrency
//
// Goroutines and what they own:
//   - the loader-writer of each shard (one goroutine: it replays, then runs the
//     writer): the State's log-derived part, the record builder;
//   - the sweeper (Start): calls Config.BeforeSweep, the lookups of every partition,
//     State.Sweep of every ready shard and Config.AfterSweep, in that order;
//   - one goroutine per unload started by a lookup or Drop (State.Unload may wait for
//     locks held by the shard's callers, so it never runs under Shards.mu nor on
//     the writer);
//   - goroutines the module starts with Shards.Go (the transaction coordinator's
//     marker workers).
//
// Each counts in Shards.wg; Wait waits for all of them. Request goroutines only
// queue writes and wait for their outcome.
//
// Locks: Shards.mu guards the map and the open/closed state. It is a leaf: nothing
// is called under it but the constructor of a new shard's State (which must only
// allocate), context cancellation and the start of goroutines. A State's own locks
// may therefore be held while calling any Shards or Shard method.
package coordinator
