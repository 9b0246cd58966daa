// Checking committed offsets partition by partition, the path OffsetCommit
// (08_offset_commit.go) and TxnOffsetCommit (28_txn_offset_commit.go) share.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// commitCodes answers a commit request partition by partition: codes[i][j] is the code
// of the request's topic i, partition j, and 0 means "commit it".
type commitCodes [][]int16

// failUnanswered gives e to every partition not answered yet.
func (codes commitCodes) failUnanswered(e *kerr.Error) {
	for i := range codes {
		for j := range codes[i] {
			if codes[i][j] == 0 {
				codes[i][j] = e.Code
			}
		}
	}
}

// commitTopicCode is the code every partition of a committed topic gets before its own
// checks: TOPIC_AUTHORIZATION_FAILED without READ on the topic, then
// UNKNOWN_TOPIC_OR_PARTITION when it does not exist (ti nil), else 0.
func commitTopicCode(ctx context.Context, req *kernel.Request, name string, ti *kernel.TopicImage) int16 {
	switch {
	case !req.Allowed(ctx, kernel.OpRead, kernel.ResTopic, name):
		return kerr.TopicAuthorizationFailed.Code
	case ti == nil:
		return kerr.UnknownTopicOrPartition.Code
	}
	return 0
}

// commits answers partition j of topic i, unless it is answered already, and says
// whether it is to be committed: the topic's code (commitTopicCode) comes first, then
// UNKNOWN_TOPIC_OR_PARTITION for a partition the topic lacks, then
// OFFSET_METADATA_TOO_LARGE for metadata over metadataMax bytes. ti may be nil only
// when topicCode is not 0.
func (codes commitCodes) commits(i, j int, topicCode int16, ti *kernel.TopicImage, partition int32, metadata *string, metadataMax int) bool {
	if codes[i][j] != 0 {
		return false
	}
	switch {
	case topicCode != 0:
		codes[i][j] = topicCode
	case partition < 0 || int(partition) >= len(ti.Partitions):
		codes[i][j] = kerr.UnknownTopicOrPartition.Code
	case metadata != nil && len(*metadata) > metadataMax:
		codes[i][j] = kerr.OffsetMetadataTooLarge.Code
	default:
		return true
	}
	return false
}

// commitSpace is the data dir's free-space check of a commit (kernel/diskguard): below
// the reserve a commit is refused with NOT_COORDINATOR, the code Kafka's coordinator
// gives a commit whose append failed with KAFKA_STORAGE_ERROR (retriable: the client
// looks the coordinator up again and retries, and succeeds once space is back). The
// guard logs the state; a refusal is not logged.
func (m *Module) commitSpace() *kerr.Error {
	if m.broker.AdmitWrite(0) != nil {
		return kerr.NotCoordinator
	}
	return nil
}

// commitRecord is the __consumer_offsets record committing c to group's topic
// partition, with the request's metadata when it has one.
func commitRecord(group, topic string, partition int32, c offsets.Committed, metadata *string) kv {
	if metadata != nil {
		c.Metadata = *metadata
	}
	return kv{key: offsets.EncodeOffsetKey(group, topic, partition), value: offsets.EncodeOffsetValue(c)}
}
