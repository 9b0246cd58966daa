package epochs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// The leader-epoch-checkpoint file is Kafka's text format (frozen: Kafka's tools and
// brokers read it), version 0:
//
//	0                 version
//	2                 number of entries
//	3 0               "<epoch> <start offset>", oldest first
//	5 1200
//
// Every line ends with "\n" (Decode also takes a last line without it, and an empty
// file as no entries, as Kafka's reader does). Kafka splits an entry line on runs of white space; so does
// Decode. A file with another version, a count that disagrees with the lines, or
// entries that break the cache's invariants does not decode.
const CheckpointVersion = 0

// ErrBadCheckpoint marks a leader-epoch-checkpoint file that does not decode.
var ErrBadCheckpoint = errors.New("bad leader epoch checkpoint")

// Encode renders entries as a leader-epoch-checkpoint file.
func Encode(es []kernel.EpochEntry) []byte {
	b := make([]byte, 0, 8+len(es)*16)
	b = strconv.AppendInt(b, CheckpointVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(len(es)), 10)
	b = append(b, '\n')
	for _, e := range es {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// Decode parses a leader-epoch-checkpoint file. The entries it returns keep the cache's
// invariants (epochs strictly increasing, start offsets non-decreasing, neither
// negative); anything else is an error wrapping ErrBadCheckpoint. It never panics and
// allocates at most one entry per line of input.
func Decode(b []byte) ([]kernel.EpochEntry, error) {
	if len(b) == 0 {
		return nil, nil // Kafka creates the file empty and reads it as no entries
	}
	// Kafka's reader takes the last line with or without its newline.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: no count line", ErrBadCheckpoint)
	}
	if v, err := strconv.Atoi(lines[0]); err != nil || v != CheckpointVersion {
		return nil, fmt.Errorf("%w: version %q", ErrBadCheckpoint, lines[0])
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q with %d entry lines", ErrBadCheckpoint, lines[1], len(lines)-2)
	}
	es := make([]kernel.EpochEntry, 0, count)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: entry %d: %q", ErrBadCheckpoint, i, line)
		}
		epoch, err1 := strconv.ParseInt(f[0], 10, 32)
		start, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("%w: entry %d: %q", ErrBadCheckpoint, i, line)
		}
		if n := len(es); n > 0 && (int32(epoch) <= es[n-1].Epoch || start < es[n-1].StartOffset) {
			return nil, fmt.Errorf("%w: entry %d (%d at %d) out of order after %d at %d", ErrBadCheckpoint, i, epoch, start, es[n-1].Epoch, es[n-1].StartOffset)
		}
		es = append(es, kernel.EpochEntry{Epoch: int32(epoch), StartOffset: start})
	}
	return es, nil
}
