package segmentlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/sluicehq/sluice/kernel"
)

// Log dir failure (Kafka's LogDirFailureChannel, per directory). A Store whose
// directory stops taking writes is failed for the rest of the process: every Log
// call of its partitions answers kernel.ErrLogOffline (KAFKA_STORAGE_ERROR to
// clients; the replication module resigns leadership of them as for a corrupt log),
// it writes no checkpoint and no clean-shutdown marker, and placement sends no new
// partition to it. The other directories of the broker keep serving. The next start
// opens the directory again: if it is healthy, its partitions recover from their
// recovery points like after a crash.
//
// What fails a directory:
//   - EIO or EROFS from any file operation of the store or its logs (the disk or
//     its file system is gone bad, or was remounted read-only);
//   - any error of a file operation while the directory itself no longer stats as a
//     directory (unmounted, removed, replaced by a file), which the flush loop also
//     checks once a pass, so an idle directory's loss is seen too.
//
// ENOSPC is not a failure: a full disk is the directory's disk guard's (Store.guard,
// kernel.SpaceLog: produce to its partitions refused and their follower appends held
// back, reads and deletes go on, writes resume by themselves).

// dirFailure is why a Store failed.
type dirFailure struct{ err error }

// failed returns the error that failed the store's directory, nil while it is
// healthy.
func (s *Store) failed() error {
	if f := s.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

// fail marks the store failed (the first call wins) and logs it once.
func (s *Store) fail(err error) {
	if !s.failure.CompareAndSwap(nil, &dirFailure{err: err}) {
		return
	}
	s.mu.Lock()
	n := len(s.logs)
	s.mu.Unlock()
	s.logger.Error("log dir failed: its partitions are offline until the broker restarts with the dir healthy",
		"dir", s.dir, "partitions_open", n, "err", err)
}

// noteErr fails the store when err, from a file operation in it, says the directory
// is lost (see the list above). Other errors (a full disk, a corrupt batch, a closed
// log, the protocol's own refusals) are left to their callers.
func (s *Store) noteErr(err error) {
	if err == nil || s.failure.Load() != nil {
		return
	}
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	if !errors.As(err, &pe) && !errors.As(err, &le) && !errors.As(err, &errno) {
		return
	}
	if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS) {
		s.fail(err)
		return
	}
	if derr := s.checkRoot(); derr != nil {
		s.fail(fmt.Errorf("%w (after: %w)", derr, err))
	}
}

// checkRoot reports why the store's directory is unusable, nil when it still stats
// as a directory.
func (s *Store) checkRoot() error {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("log dir %s is no longer a directory", s.dir)
	}
	return nil
}

// probe is the flush loop's health check: it fails the store when its directory is
// gone, though nothing was written since.
func (s *Store) probe() {
	if s.failure.Load() != nil {
		return
	}
	if err := s.checkRoot(); err != nil {
		s.fail(err)
	}
}

// dirOfflineErr is the error of every Log call in a failed store.
func (l *Log) dirOfflineErr() error {
	if err := l.store.failed(); err != nil {
		return fmt.Errorf("%v: %w: log dir %s failed: %w", l.tp, kernel.ErrLogOffline, l.store.dir, err)
	}
	return nil
}

// Offline implements kernel.OfflineLog.
func (l *Log) Offline() error { return l.offlineErr() }
