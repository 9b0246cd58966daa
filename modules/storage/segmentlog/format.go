package segmentlog

// File names and sizes of the on-disk format; see doc.go. All frozen: Kafka tools read
// these files.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"

	offsetEntrySize = 8  // | relative offset u32 | position u32 |
	timeEntrySize   = 12 // | timestamp i64 | relative offset u32 |

	recoveryCheckpointFile = "recovery-point-offset-checkpoint"
	logStartCheckpointFile = "log-start-offset-checkpoint"
	checkpointVersion      = 0
	cleanShutdownFile      = ".kafka_cleanshutdown"
	partitionMetadataFile  = "partition.metadata"
)
