package segmentlog

import "fmt"

// File names and sizes of the on-disk format; see doc.go. All frozen: Kafka tools read
// these files.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
	snapshotSuffix  = ".snapshot"
	deletedSuffix   = ".deleted"
	// straySuffix ends the name a partition directory of an older topic id is moved
	// to: "<old id, 32 hex>-<partition>-stray", as Kafka's stray logs. The name
	// leaves out the topic, so it fits NAME_MAX whatever the topic's length (249).
	straySuffix = "-stray"
	// deleteDirSuffix ends the name Remove renames a partition directory to before
	// deleting it: "<random, 16 hex>-delete" (short for the same reason); leftovers
	// of a crash are deleted at the next open.
	deleteDirSuffix = "-delete"

	offsetEntrySize = 8  // | relative offset u32 | position u32 |
	timeEntrySize   = 12 // | timestamp i64 | relative offset u32 |

	recoveryCheckpointFile = "recovery-point-offset-checkpoint"
	logStartCheckpointFile = "log-start-offset-checkpoint"
	checkpointVersion      = 0
	cleanShutdownFile      = ".kafka_cleanshutdown"
	partitionMetadataFile  = "partition.metadata"
	epochCheckpointFile    = "leader-epoch-checkpoint"
	hwCheckpointFile       = "replication-offset-checkpoint"
	cleanerCheckpointFile  = "cleaner-offset-checkpoint"
)

// strayDirName is the directory name a partition directory of topic id id is moved to.
func strayDirName(id [16]byte, partition int32) string {
	return fmt.Sprintf("%x-%d%s", id, partition, straySuffix)
}
