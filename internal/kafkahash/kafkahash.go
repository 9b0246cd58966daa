// Package kafkahash computes which partition of a coordinator's internal topic owns a
// key, exactly as Kafka does, so a Sluice broker and Kafka's tools agree on where a
// group (__consumer_offsets) or a transactional id (__transaction_state) lives.
package kafkahash

import "math"

// Partition returns the absolute value of Java's String.hashCode of key modulo n
// (n > 0). The hash is over UTF-16 code units, so non-ASCII keys agree with Kafka;
// Kafka's Utils.abs maps MinInt32 to 0.
func Partition(key string, n int32) int32 {
	var h int32
	for _, r := range key {
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == math.MinInt32 {
		h = 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}
