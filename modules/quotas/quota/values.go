package quota

import (
	"fmt"
	"math"
)

// Quota keys.
const (
	ProducerByteRate       = "producer_byte_rate"       // bytes/s, whole number, user/client-id entities
	ConsumerByteRate       = "consumer_byte_rate"       // bytes/s, whole number, user/client-id entities
	RequestPercentage      = "request_percentage"       // percent of one request-handling thread, user/client-id entities
	ControllerMutationRate = "controller_mutation_rate" // partitions mutated per second, user/client-id entities
	ConnectionCreationRate = "connection_creation_rate" // connections/s, whole number, ip entities only
)

// Values are one entity's configured quotas: key -> value.
type Values map[string]float64

// clone returns a copy of v (nil for an empty v).
func (v Values) clone() Values {
	if len(v) == 0 {
		return nil
	}
	c := make(Values, len(v))
	for k, x := range v {
		c[k] = x
	}
	return c
}

// equal reports whether v and w hold the same keys and values.
func (v Values) equal(w Values) bool {
	if len(v) != len(w) {
		return false
	}
	for k, x := range v {
		y, ok := w[k]
		if !ok || x != y {
			return false
		}
	}
	return true
}

// Indexes of the known keys (keyIndex), used by Set's per-key counts.
const (
	kProducer = iota
	kConsumer
	kRequest
	kMutation
	kConnection
	numKeys
)

// keyIndex returns key's index, or -1 for a key this package does not know.
func keyIndex(key string) int {
	switch key {
	case ProducerByteRate:
		return kProducer
	case ConsumerByteRate:
		return kConsumer
	case RequestPercentage:
		return kRequest
	case ControllerMutationRate:
		return kMutation
	case ConnectionCreationRate:
		return kConnection
	}
	return -1
}

// How a key's values are checked, after Kafka's config types of the quota keys.
const (
	kindDouble = iota // > 0, finite
	kindLong          // > 0, whole, < 2^63
	kindInt           // > 0, whole, <= 2^31-1
)

// keyKind returns how the values of key (index k) are checked.
func keyKind(k int) int {
	switch k {
	case kProducer, kConsumer:
		return kindLong
	case kConnection:
		return kindInt
	}
	return kindDouble
}

// allowed reports whether the key of index k may be set on e.
func allowed(e Entity, k int) bool {
	if k < 0 {
		return false
	}
	return (k == kConnection) == e.IsIP()
}

// wholeSlack is how far above a whole number a whole-number key's value may be: Kafka
// accepts a value whose remainder modulo 1 is at most 1e-6.
const wholeSlack = 1e-6

// ValidateValue checks that key may be set on e and that v is acceptable, as Kafka's
// controller checks AlterClientQuotas:
//
//   - user and client-id entities take producer_byte_rate and consumer_byte_rate (whole
//     numbers, > 0, below 2^63), request_percentage and controller_mutation_rate (> 0);
//   - ip entities take only connection_creation_rate (a whole number, > 0, at most
//     2^31-1: Kafka's type for it is an int, and it refuses 0 for every key);
//   - NaN and ±Inf are refused for every key (Kafka would take NaN for a double key).
//
// "Whole" is Kafka's rule: v mod 1 must be at most 1e-6, so 1000.0000001 passes (and
// is kept as given) while 999.9999999 does not.
//
// Errors wrap ErrInvalidQuota and name the key; the zero Entity gives an error wrapping
// ErrInvalidEntity.
func ValidateValue(e Entity, key string, v float64) error {
	if !e.valid() {
		return fmt.Errorf("%w: the zero Entity", ErrInvalidEntity)
	}
	if err := checkKey(e, key); err != nil {
		return err
	}
	k := keyIndex(key)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s must be a finite number, not %v", ErrInvalidQuota, key, v)
	}
	if v <= 0 {
		return fmt.Errorf("%w: %s must be greater than 0, not %v", ErrInvalidQuota, key, v)
	}
	switch keyKind(k) {
	case kindLong:
		if v >= 1<<63 { // 2^63-1 has no float64: the largest below 2^63 is 2^63-1024
			return fmt.Errorf("%w: %s of %v is too large (at most 2^63-1)", ErrInvalidQuota, key, v)
		}
	case kindInt:
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: %s of %v is too large (at most %d)", ErrInvalidQuota, key, v, math.MaxInt32)
		}
	default:
		return nil
	}
	if math.Mod(v, 1) > wholeSlack {
		return fmt.Errorf("%w: %s must be a whole number, not %v", ErrInvalidQuota, key, v)
	}
	return nil
}

// checkKey returns an error unless key may be set on (or removed from) e.
func checkKey(e Entity, key string) error {
	if !allowed(e, keyIndex(key)) {
		kind := "user/client-id"
		if e.IsIP() {
			kind = "ip"
		}
		return fmt.Errorf("%w: %q is not a quota key of %s entities", ErrInvalidQuota, key, kind)
	}
	return nil
}
