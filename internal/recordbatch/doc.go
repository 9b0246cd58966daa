// Package recordbatch reads, checks and writes Kafka magic-2 record batches: the unit a
// producer sends, the log stores and a consumer fetches.
//
// The produce path calls Validate on every batch before it is stored; transforms iterate
// records with a Decoder and re-encode them with a Builder; tests everywhere build
// batches with Build.
//
//	in, err := recordbatch.Validate(batch)          // header, CRC, codec, every record
//	if errors.Is(err, recordbatch.ErrCorrupt) { ... } // -> CORRUPT_MESSAGE
//
//	var d recordbatch.Decoder                       // keep one per worker
//	_, err = d.Records(batch, func(r *recordbatch.Record) error {
//		use(r.Key, r.Value, r.Headers)          // valid until the next d.Records
//		return nil
//	})
//
//	b, _ := recordbatch.NewBuilder(recordbatch.OptionsFrom(in.Header))
//	b.Add(&recordbatch.Record{Key: k, Value: v})
//	out, _ := b.AppendTo(nil)
//
//	recordbatch.SetLogAppendTime(out, nowMillis)    // topic with LogAppendTime
//
// # Format
//
// The batch header is drawn in header.go next to its offset constants. After it comes
// the records section: RecordCount records back to back, compressed as one stream when
// the codec (attribute bits 0-2) is not 0. Each record is (varint = zigzag int32 in at
// most 5 bytes, varlong = zigzag int64 in at most 10, 7 bits a byte, low bits first):
//
//	| length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//	| keyLength varint | key | valueLength varint | value |
//	| headerCount varint | headers: ( keyLength varint | key | valueLength varint | value )* |
//
//	length         bytes after the length field; the fields must use exactly that many
//	key, value     length -1 is null; header keys may not be null, header values may
//	offsetDelta    the i-th record (from 0) has offsetDelta i
//	timestamp      BaseTimestamp + timestampDelta (CreateTime); with LogAppendTime
//	               (attribute bit 3) every record's timestamp is the batch MaxTimestamp
//
// Codecs: 1 gzip (RFC 1952, members may be concatenated), 2 snappy — either one raw
// snappy block (librdkafka, franz-go) or snappy-java's xerial framing (the Java client):
//
//	| 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00 | version int32 | compatible int32 | ( length int32 | snappy block )* |
//
// 3 lz4 (LZ4 frame format), 4 zstd (zstd frames). Values 5-7 are rejected with ErrCodec.
// All of this is frozen by the Kafka protocol; the package has no format version of its
// own.
//
// # Invariants
//
//   - Validate accepts a batch only if every check passes: magic 2, BatchLength equal to
//     the bytes given, CRC-32C over Attributes..end, a known codec, a records section
//     that decompresses within the limit, every record framed exactly, RecordCount
//     records with offset deltas 0..n-1, LastOffsetDelta n-1 (not checked for empty
//     batches, which compaction leaves behind), and nothing after the last record.
//   - Every error it returns satisfies errors.Is(err, ErrCorrupt); the sentinels ErrShort,
//     ErrMagic, ErrCRC, ErrLength, ErrRecords, ErrCodec and ErrTooLarge tell causes apart.
//   - Decoder.Records calls its callback only for batches that pass Validate, after the
//     whole batch has been checked, so a transform never sees half a corrupt batch.
//   - Memory is driven by bytes actually produced, never by counts or lengths read from
//     the wire: output buffers grow by doubling up to the limit (DefaultMaxUncompressed:
//     64 MiB + 32 x batch size, or the ValidateWithLimit argument); a raw snappy block may
//     not claim more than 22 x its size (more than snappy can encode); zstd frames are
//     walked before decoding and rejected if their declared content sizes add up to more
//     than the limit, and zstd windows are capped at 8 MiB.
//   - Across batches, ValidateBudget bounds the output held at once by everyone sharing
//     a DecompressBudget (budget.go; the broker's queued.max.decompressed.bytes, which
//     Kafka has no equivalent of): a batch reserves before it decodes, restarts with a
//     larger reservation (never waiting while holding one) when it outgrows it, and
//     waits only as long as its context allows (ErrBudget, not ErrCorrupt). The
//     transient copy when a buffer doubles, and buffers the decompressor pool keeps
//     (at most 8 MiB each), are outside the count.
//   - No allocation per record. Validate and a reused Decoder allocate nothing in the
//     steady state; headers go into a slice reused across records.
//   - Builder writes offset delta i for the i-th record and MaxTimestamp as the largest
//     record timestamp (-1 for an empty batch); what it writes, Validate accepts.
//
// # Concurrency
//
// Validate, ValidateWithLimit, ValidateBudget, Records, ParseHeader, CheckCRC, Split
// and a DecompressBudget are safe for concurrent use. They draw decompressors from a package-level sync.Pool; each pooled
// value holds decoders whose configuration is fixed at creation and is used by one
// goroutine at a time, so the pool holds no shared mutable state beyond reuse. A Decoder
// and a Builder belong to one goroutine at a time. Nothing here starts goroutines (the
// zstd decoder runs with concurrency 1, synchronously).
package recordbatch
