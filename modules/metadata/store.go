package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bucket names inside raft.db. Frozen: renaming one orphans existing data.
var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("stable")
)

// logEncodingV1 is the first byte of every stored log entry (see doc.go).
const logEncodingV1 = 1

// logHeaderLen is the fixed part of an encoded entry: version, index, term, type,
// appended_at, data length.
const logHeaderLen = 1 + 8 + 8 + 1 + 8 + 4

// Errors of the store.
var (
	// ErrCorruptEntry marks a stored log entry whose bytes do not decode.
	ErrCorruptEntry = errors.New("metadata: corrupt raft log entry")
)

// boltStore is raft's LogStore and StableStore on one bbolt file. Every write is one
// fsync'd bbolt transaction.
type boltStore struct {
	db   *bolt.DB
	path string
}

// openBoltStore opens (creating if needed) the store at path.
func openBoltStore(path string) (*boltStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		// The kernel's data-dir lock normally says this first, naming the pid.
		return nil, fmt.Errorf("open %s: in use by another process (%w)", path, err)
	case err != nil:
		return nil, storeErr("open", path, err)
	}
	s := &boltStore{db: db, path: path}
	err = s.update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLogs, bucketStable} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// update is one bbolt write transaction, its error naming the file (and, when the file
// system is full, what to do: raft cannot go on without its log).
func (s *boltStore) update(fn func(tx *bolt.Tx) error) error {
	if err := s.db.Update(fn); err != nil {
		return storeErr("write", s.path, err)
	}
	return nil
}

// storeErr wraps err of op on the raft store at path.
func storeErr(op, path string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("metadata store %s: %s: the file system is full; free space on the data dir and restart: %w", path, op, err)
	}
	return fmt.Errorf("metadata store %s: %s: %w", path, op, err)
}

// Close closes the file.
func (s *boltStore) Close() error { return s.db.Close() }

func indexKey(i uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], i)
	return k[:]
}

// FirstIndex returns the first stored index, 0 when empty.
func (s *boltStore) FirstIndex() (uint64, error) { return s.edgeIndex((*bolt.Cursor).First) }

// LastIndex returns the last stored index, 0 when empty.
func (s *boltStore) LastIndex() (uint64, error) { return s.edgeIndex((*bolt.Cursor).Last) }

// edgeIndex returns the index of the log entry that seek (a cursor's First or Last)
// finds, 0 when the log is empty.
func (s *boltStore) edgeIndex(seek func(*bolt.Cursor) (key, value []byte)) (uint64, error) {
	var i uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := seek(tx.Bucket(bucketLogs).Cursor()); k != nil {
			i = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return i, err
}

// GetLog reads the entry at index into l; raft.ErrLogNotFound when absent.
func (s *boltStore) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if err := decodeLog(v, l); err != nil {
			return fmt.Errorf("log %d: %w", index, err)
		}
		return nil
	})
}

// StoreLog stores one entry.
func (s *boltStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one transaction: all or none.
func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			if err := b.Put(indexKey(l.Index), encodeLog(l)); err != nil {
				return fmt.Errorf("store log %d: %w", l.Index, err)
			}
		}
		return nil
	})
}

// DeleteRange deletes entries with min <= index <= max.
func (s *boltStore) DeleteRange(minIdx, maxIdx uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(indexKey(minIdx)); k != nil && binary.BigEndian.Uint64(k) <= maxIdx; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set stores a stable value.
func (s *boltStore) Set(key, val []byte) error {
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStable).Put(key, val)
	})
}

// Get returns a stable value, or an empty slice when the key is absent.
func (s *boltStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = append([]byte{}, tx.Bucket(bucketStable).Get(key)...)
		return nil
	})
	return out, err
}

// SetUint64 stores a stable uint64 (big endian).
func (s *boltStore) SetUint64(key []byte, val uint64) error { return s.Set(key, indexKey(val)) }

// GetUint64 returns a stable uint64, 0 when the key is absent.
func (s *boltStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable key %q: %d bytes, want 8: %w", key, len(v), ErrCorruptEntry)
	}
	return binary.BigEndian.Uint64(v), nil
}

// encodeLog writes the v1 entry format (see doc.go).
func encodeLog(l *raft.Log) []byte {
	buf := make([]byte, logHeaderLen, logHeaderLen+len(l.Data)+4+len(l.Extensions))
	buf[0] = logEncodingV1
	binary.BigEndian.PutUint64(buf[1:], l.Index)
	binary.BigEndian.PutUint64(buf[9:], l.Term)
	buf[17] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(buf[18:], uint64(at))
	binary.BigEndian.PutUint32(buf[26:], uint32(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(l.Extensions)))
	return append(buf, l.Extensions...)
}

// decodeLog parses the v1 entry format, copying out of v (bbolt memory is only valid
// inside its transaction).
func decodeLog(v []byte, l *raft.Log) error {
	if len(v) < logHeaderLen+4 {
		return fmt.Errorf("%d bytes: %w", len(v), ErrCorruptEntry)
	}
	if v[0] != logEncodingV1 {
		return fmt.Errorf("encoding version %d: %w", v[0], ErrCorruptEntry)
	}
	dataLen := uint64(binary.BigEndian.Uint32(v[26:]))
	rest := v[logHeaderLen:]
	if uint64(len(rest)) < dataLen+4 {
		return fmt.Errorf("data length %d: %w", dataLen, ErrCorruptEntry)
	}
	extLen := uint64(binary.BigEndian.Uint32(rest[dataLen:]))
	if uint64(len(rest)) != dataLen+4+extLen {
		return fmt.Errorf("extensions length %d: %w", extLen, ErrCorruptEntry)
	}
	*l = raft.Log{
		Index: binary.BigEndian.Uint64(v[1:]),
		Term:  binary.BigEndian.Uint64(v[9:]),
		Type:  raft.LogType(v[17]),
	}
	if at := int64(binary.BigEndian.Uint64(v[18:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	if dataLen > 0 {
		l.Data = append([]byte(nil), rest[:dataLen]...)
	}
	if extLen > 0 {
		l.Extensions = append([]byte(nil), rest[dataLen+4:]...)
	}
	return nil
}

var (
	_ raft.LogStore    = (*boltStore)(nil)
	_ raft.StableStore = (*boltStore)(nil)
)
