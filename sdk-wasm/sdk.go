package sdk

import (
	"os"
	"strconv"
	"time"
)

// Header is a record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is a Kafka record.
//
// In a record passed to a callback, Key, Value and the header Values are
// slices of the SDK's input buffer: they are valid only until the callback
// returns. Copy them (bytes.Clone) to keep them longer. Header keys are
// ordinary strings and may be kept.
type Record struct {
	// Key and Value: nil is null; an empty non-nil slice is an empty value.
	Key, Value []byte
	// Headers, in order. The slice is the SDK's: do not append to it in
	// place beyond the callback (appending makes a copy, which is fine).
	Headers []Header
	// Timestamp is the record's timestamp (millisecond precision). In a
	// written record, the zero Timestamp means "the input record's
	// timestamp" with OnRecord and "the batch's base timestamp" with OnBatch.
	Timestamp time.Time
	// Offset is the record's offset in derived mode, and -1 in inline mode
	// (the record is not appended yet). Ignored in written records.
	Offset int64

	src *batchSource // see Source
}

// Source returns who produced the record's batch (see Source); the zero
// Source for a record the SDK did not pass in (unless set with WithSource).
// Valid only during the callback, like the record. A written record's
// source is ignored: output records carry no producer.
func (r Record) Source() Source { return r.src.get() }

// WithSource returns a copy of r whose Source is s: for tests of a transform
// function that reads it, outside the broker.
func (r Record) WithSource(s Source) Record {
	r.src = fixedSource(s)
	return r
}

// Batch is one input batch: the records of one produce request for one
// partition (inline mode) or one appended batch (derived mode).
//
// The Batch and its Records are the SDK's and are valid only during the
// callback (see Record).
type Batch struct {
	Topic     string
	Partition int32
	Records   []Record

	// BaseOffset is the offset of the first record in derived mode, -1 in
	// inline mode.
	BaseOffset    int64
	BaseTimestamp time.Time
	MaxTimestamp  time.Time
	// Attributes are the Kafka batch attributes (codec, timestamp type,
	// transactional flag, ...).
	Attributes    int16
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32

	src *batchSource
}

// Source returns who produced the batch (see Source). Valid only during the
// callback, like the batch.
func (b *Batch) Source() Source { return b.src.get() }

// WithSource sets the Source of b and of its Records to s and returns b: for
// tests of a batch function that reads it, outside the broker.
func (b *Batch) WithSource(s Source) *Batch {
	b.src = fixedSource(s)
	for i := range b.Records {
		b.Records[i].src = b.src
	}
	return b
}

// Source is who produced a batch: the principal the producer authenticated as
// and the client id it sent with the Produce request (ABI.md, batch_source).
//
// Inline transforms see the producer of every batch: PrincipalType "User"
// and PrincipalName "ANONYMOUS" for a client that did not authenticate, its
// user name (or mapped certificate name) for one that did. Derived
// transforms read records already stored, whose producer is not known: they
// see the zero Source.
//
// The SDK asks the broker the first time Source is called for a batch, so a
// transform that never calls it does not import batch_source and also runs
// on brokers older than the function.
type Source struct {
	PrincipalType string // "User"; "" when unknown
	PrincipalName string // "alice", "ANONYMOUS"; "" when unknown
	// ClientID is the Produce request's client id ("" if the client sent
	// none, or unknown).
	ClientID string
}

// Principal returns the principal in Kafka's form, "User:alice", or "" when
// it is unknown (derived mode).
func (s Source) Principal() string {
	if s.PrincipalType == "" && s.PrincipalName == "" {
		return ""
	}
	return s.PrincipalType + ":" + s.PrincipalName
}

// Inline reports whether the batch comes from an inline transform (records
// not appended yet; outputs go to the input topic).
func (b *Batch) Inline() bool { return b.BaseOffset < 0 }

// Writer writes output records for the current batch. Writes are buffered
// and handed to the broker together when the callback for the batch returns
// successfully; if the callback returns an error, they are discarded.
// Write copies the record, so its slices may be reused as soon as it returns.
type Writer interface {
	// Write writes r to the default output: the input topic in inline mode,
	// the first output topic (index 0) in derived mode.
	Write(r Record) error
	// WriteTo writes r to output topic number output (0..7, see
	// OutputTopic). Derived mode only; inline transforms may only use 0.
	WriteTo(output int, r Record) error
}

// OnRecord runs the transform: fn is called for each input record, in order.
// It never returns.
//
// If fn returns an error, the rest of the batch is skipped, nothing written
// for the batch is kept, and the batch fails with the error's message: the
// transform's error policy (reject, drop or dlq) applies to all the batch's
// records. If fn panics, the module traps: the batch fails likewise and the
// instance ends (the broker decides whether and when to start another).
func OnRecord(fn func(r Record, w Writer) error) {
	serve(defaultHost(), perRecord(fn))
	panic("unreachable")
}

// perRecord adapts a record callback to the batch loop.
func perRecord(fn func(r Record, w Writer) error) func(*Batch, *writer) error {
	return func(b *Batch, w *writer) error {
		for i := range b.Records {
			w.defaultTS = b.Records[i].Timestamp
			if err := fn(b.Records[i], w); err != nil {
				return err
			}
		}
		return nil
	}
}

// OnBatch runs the transform: fn is called for each input batch. It never
// returns. Errors and panics are handled as with OnRecord.
func OnBatch(fn func(b *Batch, w Writer) error) {
	serve(defaultHost(), perBatch(fn))
	panic("unreachable")
}

func perBatch(fn func(b *Batch, w Writer) error) func(*Batch, *writer) error {
	return func(b *Batch, w *writer) error { return fn(b, w) }
}

// InputTopic returns the transform's input topic (SLUICE_INPUT_TOPIC).
func InputTopic() string { return os.Getenv("SLUICE_INPUT_TOPIC") }

// OutputTopic returns the name of output topic number i
// (SLUICE_OUTPUT_TOPIC_<i>), or "" if there is none.
func OutputTopic(i int) string {
	if i < 0 {
		return ""
	}
	return os.Getenv("SLUICE_OUTPUT_TOPIC_" + strconv.Itoa(i))
}

// TransformName returns the name the transform was deployed under
// (SLUICE_TRANSFORM_NAME).
func TransformName() string { return os.Getenv("SLUICE_TRANSFORM_NAME") }

// numOutputs counts the SLUICE_OUTPUT_TOPIC_<i> variables (0 if none are
// set, e.g. in tests).
func numOutputs() int {
	n := 0
	for n < maxOutputs && OutputTopic(n) != "" {
		n++
	}
	return n
}
