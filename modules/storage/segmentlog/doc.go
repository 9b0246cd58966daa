// Package segmentlog is the "storage.segmentlog" module: kernel.Storage and kernel.Log
// over Kafka's on-disk log layout, so a log directory written by Sluice can be read by
// Kafka's tools (kafka-dump-log.sh) and the other way round.
//
// Usage, in the broker config:
//
//	modules:
//	  storage:
//	    use: segmentlog
//	    dir: /var/lib/sluice          # default: the broker's data_dir
//	    retention_check_interval_ms: 300000
//	    flush_check_interval_ms: 1000
//	    high_watermark_checkpoint_interval_ms: 5000  # default: replica.high.watermark.checkpoint.interval.ms
//	    recovery_checkpoint_interval_ms: 60000     # default: log.flush.offset.checkpoint.interval.ms
//
// and from another module:
//
//	st := mod.(kernel.Storage)
//	l, _ := st.Open(kernel.TopicPartition{Topic: "orders", Partition: 0}, topicID, cfg)
//	res, _ := l.AppendLeader(batches)       // offsets assigned in place
//	rr, _ := l.Read(off, 1<<20, hw, true)   // file ranges, sent with sendfile
//	defer rr.Release()
//
// # On-disk format
//
// One directory per partition, "<topic>-<partition>", under the log dir:
//
//	<dir>/
//	  .kafka_cleanshutdown                 present only after a clean shutdown
//	  cleaner-offset-checkpoint            compacted partitions' first dirty offsets
//	  recovery-point-offset-checkpoint     | "0" | count | "topic partition offset"... |
//	  log-start-offset-checkpoint          same format
//	  replication-offset-checkpoint        same format: the high watermarks
//	  orders-0/
//	    partition.metadata                 "version: 0\ntopic_id: <base64url, no padding>\n"
//	    leader-epoch-checkpoint            | "0" | count | "epoch start_offset"... |
//	    00000000000000000000.log           segment with base offset 0
//	    00000000000000000000.index
//	    00000000000000000000.timeindex
//	    00000000000000000000.txnindex      aborted transactions whose ABORT marker is in it
//	    00000000000000368769.log           next segment: its first offset is 368769
//	    00000000000000368769.index
//	    00000000000000368769.timeindex
//	    00000000000000368769.snapshot      producer state at offset 368769 (Sluice's format)
//
// A partition directory whose partition.metadata names another (non-zero) topic id than
// the one Open is given is from an older incarnation of the topic, whose deletion this
// broker missed: it is renamed to "<old id, 32 hex digits>-<partition>-stray", e.g.
// "0a1b...9f-3-stray" (kept for the operator, never read again) and the partition
// starts empty.
//
// Partition directories that no image will open here (the topic was deleted, or the
// replica moved away, while the broker was down) are found once after the broker
// registered (Store.RemoveStrays, strays.go) and deleted like a Remove. meta.properties
// in the log dir (Kafka's name; "version=1", "cluster.id=...", "node.id=...") records
// which cluster and node the directory belongs to: until it says the same as the
// metadata (first use, or a metadata log started afresh), strays are moved aside to
// "-stray" names instead, never deleted.
//
// Remove renames a partition directory to "<16 hex digits>-delete", e.g.
// "5c0e2f9a11d4b7e3-delete", and syncs the log dir before deleting it. Neither name
// holds the topic: "<topic>-<partition>" of a 249-character topic (Kafka's longest)
// already fills most of NAME_MAX (255), so a suffix after it could not be renamed to;
// a leftover of a crash part way through is deleted at the next open. A partition
// whose directory does not exist starts empty at offset 0 whatever the checkpoints say
// (their entry is from a removed incarnation).
//
// Segment files are named by their base offset, zero-padded to 20 digits: base 0 is
// "00000000000000000000.log", base 368769 is "00000000000000368769.log". A .log file is
// magic-2 record batches back to back, exactly as produced (see internal/recordbatch);
// nothing else is in it.
//
// The offset index (.index) is sparse, 8 bytes per entry, big-endian:
//
//	| relative offset u32 | position u32 |   last offset of the batch - base, its file position
//
// An entry is added for a batch when more than index.interval.bytes were written since
// the last entry (so the first batch of a segment, at position 0, never has one; an
// all-zero entry therefore marks the end of a preallocated file).
//
// The time index (.timeindex), 12 bytes per entry, big-endian:
//
//	| timestamp i64 | relative offset u32 |   max timestamp so far, and the last offset of the
//	                                           batch that first reached it
//
// An entry is added at the same points as the offset index, when the segment's max
// timestamp grew; when a segment is sealed a final entry with its max timestamp is added.
//
// While a segment is active both index files are preallocated to segment.index.bytes
// (a sparse Truncate); when it is sealed (roll, close) they are trimmed to their
// entries. A segment rolls when the append would pass segment.bytes, when segment.ms
// passed (measured from the first batch's timestamp, else from creation, minus
// segment.jitter.ms), when either index is full, or when relative offsets or positions
// would overflow 32 bits.
//
// The transaction index (.txnindex, Kafka's layout) exists only for segments holding
// ABORT markers: one 34-byte entry per aborted transaction, big-endian, in marker order:
//
//	| version i16 (0) | producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64 |
//
// first_offset is the transaction's first batch in the partition, last_offset its ABORT
// marker, last_stable_offset the first unstable offset once this transaction ended
// (another producer's open transaction), or the marker's offset + 1 if none is open.
// The entry is written (not synced) before the marker's batch; the entries are synced
// before the next producer snapshot. The file goes with its segment (retention,
// DeleteRecordsBefore, truncation).
//
// A producer snapshot "<20-digit offset>.snapshot" holds the producer state as of that
// log end offset (taken at every segment roll, before the new segment's first batch,
// at Close, and after a recovery that replayed batches); the newest 3 are kept, ones below the first segment are deleted.
// Sluice's own format (not Kafka's), version 1, big-endian (producers.EncodeSnapshot):
//
//	| version u16 | crc32c u32 | offset i64 | count u32 | count × entry |   crc covers offset..end
//	entry: | producer_id i64 | epoch i16 | last_seq i32 | last_ts i64 | coordinator_epoch i32 |
//	       | txn_start_offset i64 (-1: none) | last_offset i64 | n u8 (<= 5) | n × batch |
//	batch: | first_seq i32 | last_seq i32 | base_offset i64 | last_offset i64 | append_ms i64 |
//
// Entries are sorted by producer id, strictly increasing. A reader accepts version 1
// only; a new version bumps producers.SnapshotVersion and keeps reading the previous one.
// Written as a .tmp file, fsynced and renamed (the directory is not synced: losing the
// rename only means a longer replay).
//
// Checkpoint files are Kafka's text format: a version line "0", a count line, then one
// "topic partition offset" line per partition. They are written atomically: write a
// .tmp file, fsync, rename, fsync the directory. replication-offset-checkpoint holds
// every partition's high watermark (Log.SetHighWatermark keeps it in memory, an
// atomic store); the module's loop writes it every
// replica.high.watermark.checkpoint.interval.ms when one changed, and Close writes it.
// An unreadable one is logged and ignored (high watermarks are derived state); a
// checkpointed HW is clamped to the log recovery keeps.
//
// The leader-epoch-checkpoint (Kafka's format and name, see internal/epochs) is one per
// partition: a version line "0", a count line, then "epoch start_offset" lines,
// oldest first:
//
//	0
//	2
//	3 0
//	5 1200
//
// It is rewritten atomically whenever the entries change: an append whose batch header
// (partition leader epoch, bytes 12-16) carries a newer epoch, AssignEpoch, Truncate,
// Reset. Appends in the current epoch never write it. A moving log start (retention,
// DeleteRecordsBefore) changes the first entry's start; that is written lazily (flush
// loop, Flush, Close), since open applies the log start offset again. Flush writes a
// pending change before it moves the recovery point, so the file is right for every
// offset below the recovery point (see epochs.go).
//
// All of the above is frozen by Kafka; there is no Sluice-specific version to bump.
// The checkpoint version is 0; a file with another version fails the open.
//
// # Recovery
//
// Opening the store consumes .kafka_cleanshutdown. Closing the store writes it only when
// every partition directory is known clean: after a crash, a partition is recovered when
// its log is first opened, so a run that never opened one (or whose Close of a log
// failed) writes no marker, and the next open recovers each partition from its
// recovery point. When it was present every index is
// still checked cheaply against its log (entries in order and inside the file, the last
// entry naming the batch at its position, the batches after the last entry readable);
// an index that disagrees, or is missing, is rebuilt. When it was absent (a crash),
// every segment from the one holding the partition's recovery point on is scanned batch
// by batch: header (recordbatch.ParseHeader), length inside the file, offsets strictly
// increasing and >= the segment base, CRC (recordbatch.CheckCRC). At the first torn or
// corrupt batch (kernel.ErrCorrupt) the segment is truncated there and every later
// segment is deleted; a torn tail is the expected result of a crash mid-append. Indexes
// of recovered segments are rebuilt from the scan. Any other error (an I/O failure)
// fails the open instead: truncating because the disk is failing would destroy data.
//
// The producer state is then rebuilt (loadProducers): the newest snapshot at or below
// the log end that decodes (snapshots above the log end are deleted; corrupt ones are
// skipped with a warning; none usable: start empty at the first segment), the
// .txnindex entries below the snapshot's offset, then every batch header from that
// offset to the log end is replayed without checks (markers are read whole), which
// re-derives the aborted transactions above it; the .txnindex files of those segments
// are rewritten from the result, so entries are never duplicated; a snapshot at the log
// end is then written if anything was replayed. Truncate rebuilds the
// state the same way after cutting the log. The append time of a replayed batch is not
// on disk: a duplicate of it is answered with its max timestamp as LogAppendTime, and
// sequence ranges of empty AppendProducer calls after the snapshot are forgotten.
//
// The leader epochs are then rebuilt (loadEpochs): the leader-epoch-checkpoint's
// entries that start below the first recovered segment (after a clean shutdown: below
// the log end), then every newer epoch in the batch headers from there to the log end,
// then the log start applied (entries wholly below it go, the one holding it starts
// there) and the entries at or past the log end dropped (an epoch no record carries,
// as Kafka does: a leader assigns it again). A missing or unreadable file (logged) is
// rebuilt from every batch header, which reads headers only. The file is rewritten when
// the result differs.
//
// # Reset
//
// Reset (a follower wholly below the leader's log start) removes the
// leader-epoch-checkpoint and the producer snapshots, renames every segment away
// (newest first), creates an empty segment at the new offset, syncs the directory,
// writes an empty leader-epoch-checkpoint and the checkpoints. A crash part way leaves
// the old log, a prefix of it or an empty log, each recovered as above; reset.go walks
// through every step.
//
// # Deleting segments
//
// Retention, DeleteRecordsBefore, Truncate and Reset delete whole segments: the files are
// renamed to *.deleted at once (so a crash leaves no half-deleted segment in the log;
// *.deleted files are removed at the next open) and unlinked when the last reference
// drops. Kafka waits file.delete.delay.ms before unlinking so that in-flight reads of
// the old files finish; here reads pin the segment with a reference count, which gives
// the same guarantee without a timer, so file.delete.delay.ms is not used.
//
// Time and size retention also take the active segment when it is not empty and past
// retention itself (Kafka's rule, see batches.Deletable), never DeleteRecordsBefore.
// The log then rolls a new, empty active segment at the log end offset, syncs the
// directory (the new file is durable before any old one goes), renames every old
// segment away, syncs the directory again and writes the checkpoints. The log is empty
// with log start = log end, and a restart finds the new segment's file, named by the
// log end offset, so the next offset survives even with stale checkpoints.
//
// # Compaction
//
// A log whose cleanup.policy includes compact is cleaned by the module's cleaner
// threads (compact.Cleaner; log.cleaner.* broker configs) one pass at a time; what a
// pass keeps is compact.Filter's rule set (Kafka's: latest record per key, tombstones
// and transaction markers until their KIP-534 delete horizon, no aborted data, the last
// data batch of each producer). Offsets never change: a cleaned batch keeps its base
// offset and offset range, records keep their offsets, and the log has gaps where
// records went (Read, OffsetForTimestamp and Truncate step over them).
//
// The cleanable range is [first dirty offset, cleanable end): the end is the lowest of
// the active segment's base, the high watermark, the first offset of an open
// transaction and the first segment holding a record younger than
// min.compaction.lag.ms. A pass maps that range, then rewrites the log from its first
// segment to the end of what the map covered, in groups of consecutive segments whose
// sizes sum to at most segment.bytes. Each group becomes one segment:
//
//	00000000000000000000.log.cleaned      the group's kept batches (synced)
//	00000000000000000000.index.cleaned    its indexes, built as it is written
//	00000000000000000000.timeindex.cleaned
//	00000000000000000000.txnindex.cleaned the aborted transactions whose markers it keeps
//	                                      (written even when empty)
//	00000000000000000000.swap             the manifest: "1\n<base> <end> <replace>\n"
//
// The manifest is the commit point: it is written (atomically, directory synced) only
// after the .cleaned files are durable, under mu, once the group is checked to be still
// in the log unchanged. Then the old segments are renamed to *.deleted, the .cleaned
// files to their final names (.log last), the directory is synced and the manifest
// removed. At open (recoverSwaps), before the segments are listed: for each manifest,
// the segments with a base in (base, end) are deleted (and base itself when replace is
// 0: the group held only removed records and was not the log's first segment), the
// .cleaned files left are renamed over their targets, and the manifest removed; any
// other .cleaned file is deleted. A crash at any point thus leaves the old segments
// or the new ones. The first dirty offset is kept in the log dir's
// cleaner-offset-checkpoint (Kafka's checkpoint format); a lost one only means the
// next pass maps from the log start again.
//
// # Verification
//
// Every batch a Read returns has had its framing (magic 2, a length inside the range,
// offsets increasing) and CRC-32C checked once since its segment was opened, not once
// per read (verify.go). Bytes appended by this process were validated on produce (or
// by the follower's fetch) and bytes a recovery scan kept were checked by it; both are
// trusted. What is left are the bytes a clean open loaded without reading them: each
// segment keeps the position they end at (trusted: its size at open) and the spans
// below it checked since. A Read that reaches unchecked bytes checks them (streaming
// each batch through the CRC in 64 KiB preads, after releasing mu: the segment is
// pinned) before it returns, and records the span; later reads of it cost two atomic
// loads and stay zero-copy. A truncation that keeps a prefix of a segment re-scans it
// (recoverSegment), which checks it; a segment the cleaner wrote is trusted.
//
// A batch that fails takes the whole Log offline: Read and every Append return an
// error wrapping kernel.ErrLogOffline (and a *Damage naming the file, position and the
// base offset its header claims), logged once at Error when the log goes offline.
// This is Kafka's log-dir failure, narrowed to one partition: the other partitions of
// the dir keep serving. Truncate (any offset) first cuts the damaged segment at the
// bad batch (copying its prefix when a reader pins it), deletes every later segment,
// re-scans what is left and brings the log back online; the caller (a follower) then
// refetches from its leader. A segment holding the damage that leaves the log
// otherwise (retention, DeleteRecords, Reset) also ends the offline state. Nothing is
// checked at a clean open, so a restart of a large log costs no reads. Offline,
// `sluice log verify DIR` checks every batch and index of a data dir.
//
// # Invariants
//
//   - Offsets strictly increase within and across segments; segments are sorted by base
//     offset and the last one is the active segment, the only one appended to.
//   - A segment's file holds only whole batches up to size; an append that fails is
//     truncated back, so a batch is in the log whole or not at all.
//   - LogStartOffset <= LogEndOffset; the first segment holds LogStartOffset (or the log
//     is empty and its only segment starts there, as after retention of the active
//     segment).
//   - A segment's files stay open while a ReadResult points into them: refs counts the
//     Log's own reference plus one per unreleased read. Bytes a ReadResult covers never
//     change: appends write past them, deleted segments are renamed away, and Truncate
//     cuts a segment file in place only when no reader pins it; otherwise the kept
//     prefix is copied to a new file and the pinned one is renamed away.
//   - The recovery point only moves up on a flush, and is persisted in the checkpoint;
//     everything below it is on stable storage. Truncate moves it down (under flushMu,
//     so a concurrent Flush cannot move it back up past the cut) and writes the
//     checkpoints before returning.
//   - Segment files are opened through the Store's file-handle cache (fdcache.go),
//     which keeps at most sluice.log.open.files.max of them open (default: half the
//     soft RLIMIT_NOFILE) and closes the least recently used; any operation reopens
//     what it needs. A descriptor in a ReadResult is pinned in the cache until Release,
//     so sendfile never meets a closed (or reused) descriptor. One Read pins at most
//     max(budget/8, 64) files and returns a prefix beyond that. A sealed segment's index
//     files are closed for good once on stable storage (after the flush that follows a
//     roll, and at open): lookups use the in-memory copy, 8 bytes per offset entry and
//     12 per time entry, grown as entries are added (never preallocated in memory);
//     only Truncate reopens them. Running out of descriptors (EMFILE, ENFILE) fails
//     that operation with an I/O error (errFDExhausted; KAFKA_STORAGE_ERROR at the
//     response edge) and one log line per 10 s.
//   - Producer state (Log.prod) changes only after an append's bytes are written; all
//     batches of an append are checked first (all or nothing). It always describes the
//     log up to the log end: every append, truncation and head deletion updates it
//     under mu. Producers whose last batch or marker is below the log start offset, and
//     aborted transactions whose marker is, are forgotten.
//   - The leader-epoch cache (Log.epochs) describes the log up to its end and never
//     starts below the log start; every cache entry that starts below the recovery
//     point is in the leader-epoch-checkpoint (epochs.go). The high watermark is never
//     read outside [log start, log end], and Truncate and Reset lower it to the new end.
//   - No per-record allocation on append or read: a Read allocates its pin handle and
//     Release func; header reads use ReadAt (pread) on a 12-byte buffer in that handle,
//     never the file's seek position.
//
// # Concurrency
//
// Lock order: Store.ckptMu, then Store.mu, then Log.flushMu, then Log.mu, then
// segment.ver.mu (a Read's checks take it without mu; recovery and truncation under
// mu), then fileCache.mu, then a cfile's mu (the one being opened, then an eviction
// victim's; see fdcache.go). segment.refs, segment.deleted, segment.ver.trusted/prefix
// and Log.offline are atomic and need no lock.
//
// Log.mu guards the segment list, sizes and indexes. Appends, roll, truncation and
// deletion take it exclusively; Read, OffsetForTimestamp and MaxTimestamp take it shared
// and do their preads under it, then pin what they return. Flush pins the segments to
// sync under the read lock and fsyncs without holding it, so appends continue during an
// fsync. Retention of the active segment is the exception: it does its two directory
// fsyncs under mu, so roll, deletion and their ordering are one step for appenders and
// readers (it is rare: at most once per retention pass and partition). LogStartOffset and
// LogEndOffset are atomics, readable without the lock.
//
// Log.hw is atomic: SetHighWatermark and HighWatermark take no lock (both are on the
// replication hot paths). Log.epochs is guarded by mu; the leader-epoch-checkpoint is
// written under mu, which happens only when an epoch changes.
//
// The Module owns three goroutines, the retention loop, the flush loop (flush.ms,
// rolled-but-unflushed segments, dirty checkpoints, a lazily written
// leader-epoch-checkpoint) and the high-watermark checkpoint loop; Start starts them,
// Stop cancels and waits for them before closing the store.
package segmentlog
