package recordbatch

import "errors"

// ErrCorrupt is the class of every validation error in this package: test with
// errors.Is(err, ErrCorrupt) and answer CORRUPT_MESSAGE. The specific sentinels (ErrShort,
// ErrMagic, ErrCRC, ErrLength, ErrRecords, ErrCodec, ErrTooLarge) tell causes apart.
var ErrCorrupt = errors.New("record batch: corrupt")

var (
	// ErrRecords: the records section does not decode: bad varint, impossible length,
	// a record that does not consume exactly its declared length, a record count or
	// offset delta that disagrees with the header, or bytes after the last record.
	ErrRecords error = corrupt("record batch: bad records")
	// ErrCodec: an unknown compression codec, or compressed data that does not decompress.
	ErrCodec error = corrupt("record batch: bad compression")
	// ErrTooLarge: the records section decompresses to more than the allowed size
	// (a decompression bomb, or a limit set too low).
	ErrTooLarge error = corrupt("record batch: uncompressed size over limit")
)

// corruptError is a sentinel that also matches ErrCorrupt under errors.Is.
type corruptError struct{ msg string }

func corrupt(msg string) *corruptError { return &corruptError{msg: msg} }

func (e *corruptError) Error() string { return e.msg }

// Is makes every corruptError match ErrCorrupt.
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }
