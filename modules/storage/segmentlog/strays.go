// Stray partition directories: the ones the cluster no longer places on this broker,
// found once after it registered (kernel.StrayRemover).

package segmentlog

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// metaPropertiesFile records which cluster and node the log dir belongs to, as
// Kafka's meta.properties does (the same key=value lines; Sluice reads only these):
//
//	version=1
//	cluster.id=<the metadata log's cluster id>
//	node.id=<this broker's node id>
//
// It is written (replaced atomically) by RemoveStrays. Strays are deleted only when the
// file was there before and names the same cluster and node: a data dir whose
// metadata log was started afresh (a new cluster id) would otherwise lose every
// partition, since none is in the new image. Such strays are moved aside instead.
const metaPropertiesFile = "meta.properties"

type metaProperties struct {
	clusterID string
	nodeID    int32
}

// readMetaProperties returns the recorded cluster and node; ok is false when there
// is no file or it lacks either key.
func readMetaProperties(dir string) (mp metaProperties, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, metaPropertiesFile))
	if errors.Is(err, os.ErrNotExist) {
		return mp, false, nil
	}
	if err != nil {
		return mp, false, err
	}
	var haveCluster, haveNode bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, found := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !found || strings.HasPrefix(k, "#") {
			continue
		}
		switch strings.TrimSpace(k) {
		case "cluster.id":
			mp.clusterID, haveCluster = strings.TrimSpace(v), true
		case "node.id":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil {
				return mp, false, fmt.Errorf("%s: node.id %q: %w", metaPropertiesFile, v, err)
			}
			mp.nodeID, haveNode = int32(n), true
		}
	}
	return mp, haveCluster && haveNode, nil
}

func writeMetaProperties(dir string, mp metaProperties) error {
	text := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\n", mp.clusterID, mp.nodeID)
	return writeFileAtomic(filepath.Join(dir, metaPropertiesFile), []byte(text))
}

// RemoveStrays implements kernel.StrayRemover. A directory counts as a partition's
// only when its name parses as "<topic>-<partition>" and it holds a partition.metadata
// or a segment: anything else in the data dir is not the store's to judge. Open
// partitions cost a map lookup; the others a directory listing and a small read.
func (s *Store) RemoveStrays(clusterID string, nodeID int32, keep func(kernel.TopicPartition, [16]byte) bool) (kernel.StrayResult, error) {
	var res kernel.StrayResult
	if clusterID == "" {
		return res, errors.New("remove strays: no cluster id")
	}
	want := metaProperties{clusterID: clusterID, nodeID: nodeID}
	had, ok, err := readMetaProperties(s.dir)
	if err != nil {
		return res, fmt.Errorf("remove strays: %w", err)
	}
	deleteStrays := ok && had == want
	if ok && had != want {
		s.logger.Error("the data dir belonged to another cluster or node: partitions the metadata does not place here are moved aside, not deleted",
			"dir", s.dir, "recorded_cluster_id", had.clusterID, "recorded_node_id", had.nodeID, "cluster_id", clusterID, "node_id", nodeID)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return res, fmt.Errorf("remove strays: %w", err)
	}
	var firstErr error
	var names []string
	for _, e := range ents {
		tp, ok := parsePartitionDir(e)
		if !ok {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		v, n, err := s.judgeStray(tp, dir, deleteStrays, keep)
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("remove strays: %v: %w", tp, err)
			}
		case v == strayKept:
			res.Kept++
		case v == strayNotAsked:
		default:
			res.Bytes += n
			if deleteStrays {
				res.Removed++
			} else {
				res.MovedAside++
			}
			if len(names) < 10 {
				names = append(names, tp.String())
			}
		}
	}
	if firstErr == nil && !deleteStrays {
		// Every directory left now belongs to this cluster and node.
		if err := writeMetaProperties(s.dir, want); err != nil {
			firstErr = fmt.Errorf("remove strays: %w", err)
		}
	}
	if res.Removed+res.MovedAside > 0 {
		s.logger.Warn("partition directories the metadata no longer places on this broker (topic deleted or replica moved while it was down)",
			"removed", res.Removed, "moved_aside", res.MovedAside, "log_bytes", res.Bytes, "first", names)
	}
	return res, firstErr
}

// strayVerdict is what judgeStray did with one directory.
type strayVerdict int

const (
	strayNotAsked strayVerdict = iota // open, being opened, or not a partition's
	strayKept
	strayDropped // removed or moved aside
)

// judgeStray asks keep about one partition directory while holding the partition's
// place in opening (so no open of it runs meanwhile) and removes or moves it aside
// when keep rejects it. An open or opening partition is kept without asking.
func (s *Store) judgeStray(tp kernel.TopicPartition, dir string, deleteIt bool, keep func(kernel.TopicPartition, [16]byte) bool) (v strayVerdict, logBytes int64, err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return strayNotAsked, 0, kernel.ErrLogClosed
	}
	if _, open := s.logs[tp]; open || s.opening[tp] != nil {
		s.mu.Unlock()
		return strayNotAsked, 0, nil
	}
	p := &pendingOpen{done: make(chan struct{})}
	s.opening[tp] = p
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.opening, tp)
		if v == strayDropped {
			s.forgetRemovedLocked(tp)
		}
		close(p.done)
		s.mu.Unlock()
	}()

	isPartition, logBytes := partitionDirInfo(dir)
	if !isPartition {
		return strayNotAsked, 0, nil
	}
	id, _, err := readPartitionMetadata(dir)
	if err != nil {
		return strayNotAsked, 0, err
	}
	if keep(tp, id) {
		return strayKept, 0, nil
	}
	if !deleteIt {
		if id == ([16]byte{}) {
			_, _ = rand.Read(id[:]) // a name of its own; crypto/rand never fails
		}
		stray := filepath.Join(s.dir, strayDirName(id, tp.Partition))
		if _, err := os.Stat(stray); err == nil {
			var alt [16]byte
			_, _ = rand.Read(alt[:])
			stray = filepath.Join(s.dir, strayDirName(alt, tp.Partition))
		}
		if err := os.Rename(dir, stray); err != nil {
			return strayNotAsked, 0, err
		}
		return strayDropped, logBytes, syncDir(s.dir)
	}
	gone, err := s.renameAway(tp)
	if err != nil {
		return strayNotAsked, 0, err
	}
	if gone != "" {
		if err := os.RemoveAll(gone); err != nil {
			return strayDropped, logBytes, err
		}
	}
	return strayDropped, logBytes, nil
}
