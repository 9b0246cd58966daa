// Package diskguard watches the free space of the broker's data dir and answers "may I
// write?" with one atomic load, so the produce path can ask per partition.
//
//	g := diskguard.New(dataDir, reserve, log)   // reserve 0: never refuses
//	if _, err := g.Sample(); err != nil { ... } // statfs now (also at startup)
//	go g.Run(ctx, time.Second)                  // statfs once a second until ctx ends
//	if err := g.Admit(int64(len(records))); err != nil {
//		// errors.Is(err, diskguard.ErrLow): answer KAFKA_STORAGE_ERROR
//	}
//
// # Levels
//
// free is statfs's Bavail × Bsize (what an unprivileged writer may still use), less the
// bytes admitted since the last sample (so a burst between two samples is counted,
// not only the file system's view a second ago):
//
//	free >= reserve             writable: Admit and Critical return nil
//	reserve/2 <= free < reserve low: Admit refuses (client writes: produce, offset
//	                            commits), Critical still nil (the broker's own small
//	                            writes: metadata, the offsets store, deletions)
//	free < reserve/2            critical: both refuse; a broker does not start
//
// The reserve is there so that what is not refused (raft's log, the offsets store's
// badger files, which are written through mmap and so SIGBUS instead of failing when
// the file system is full) always has room, and so that an operator can still delete
// topics and records through the API to get the space back. Writes resume by
// themselves at the first sample that sees free >= reserve again.
//
// # Other directories
//
// Watch(dir) adds a directory outside the data dir that the broker also writes (the
// groups offsets store's dir: option, which may sit on another file system): each
// sample statfs's every watched directory and the least free space of them all is
// what the levels judge (bytes admitted are taken off that figure, which errs on the
// safe side), and messages name the directory that is lowest. So a full offsets
// volume refuses client writes and, below half the reserve, the store's own writes,
// as a full data dir does.
//
// # Invariants
//
//   - Admit and Critical never block and never do I/O: one atomic load (Admit also one
//     atomic add).
//   - The state changes only in Sample (and Admit's crossing into low); each change is
//     logged once (Warn going down, Info coming back), and while low a reminder is
//     logged at most once a minute.
//   - A reserve of 0 disables the guard: Admit and Critical always return nil.
//
// # Concurrency
//
// Admit, Critical, Free and State are safe for concurrent use with each other and with
// Sample; Sample and Watch serialise on sampleMu (Run calls Sample once a second). mu
// serialises state changes and their log lines; it is never held while calling out.
package diskguard
