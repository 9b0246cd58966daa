package kernel

import "context"

// ProduceTransformer rewrites produced record batches before the partition leader
// appends them: the transforms module's inline mode. The stored bytes are the
// transformed bytes, so fetches serve them unmodified (zero-copy).
//
// The replication module calls it for every partition of a Produce request whose
// topic is Bound, after validating the input batches (CRC, codec, framing, no control
// batches) and before the append; it validates the output like any produced batch.
type ProduceTransformer interface {
	// Bound reports whether records produced to topic pass through a transform. It is
	// on the produce hot path: no allocation, no blocking.
	Bound(topic string) bool
	// TransformProduce returns the batches to append in place of records (one or more
	// validated v2 batches of tp). The output keeps each input batch's producer id,
	// epoch, base sequence, transactional flag and codec, with a fresh CRC; control
	// batches pass through unchanged. An empty result with a nil error means every
	// record was dropped: nothing is appended. An error that wraps a *kerr.Error (from
	// github.com/twmb/franz-go/pkg/kerr) is the partition's error code (the reject
	// policy); any other error answers UNKNOWN_SERVER_ERROR. Nothing is appended on
	// error. The returned slice belongs to the caller, which stamps it in place
	// (leader epoch, LogAppendTime): the transformer must not reuse it. records is
	// the produce request's buffer, which the kernel reuses once the request is
	// answered: nothing (no goroutine left running on a timeout either) may read it
	// after TransformProduce returns. src is who produced records: the principal and
	// client id of the Produce request that carried them.
	TransformProduce(ctx context.Context, tp TopicPartition, src ProduceSource, records []byte) ([]byte, error)
}

// ProduceSource is who produced a batch, as a transform sees it: the principal the
// connection acts as when the Produce request is served (Anonymous without
// authentication) and the request's client id ("" when the client sent none). Kafka
// bounds a client id to 32767 bytes; principal names come from the auth module. The
// zero ProduceSource means "not known": derived transforms read stored records,
// whose producer the log does not keep, and see it.
type ProduceSource struct {
	Principal Principal
	ClientID  string
}

// TransformHook is implemented by the replication module: the transforms module finds
// it with ctx.Lookup("replication") at Provision and registers itself, so replication
// does not depend on transforms (which depends on replication for its dead-letter and
// derived-mode writes).
type TransformHook interface {
	SetProduceTransformer(ProduceTransformer)
}
