package kconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Config types, with Kafka's DescribeConfigs wire values.
const (
	TypeUnknown  Type = 0
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// String returns Kafka's upper-case name of the type ("LONG").
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeShort:
		return "SHORT"
	case TypeLong:
		return "LONG"
	case TypeDouble:
		return "DOUBLE"
	case TypeList:
		return "LIST"
	case TypeClass:
		return "CLASS"
	case TypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// String returns Kafka's name of the source ("DYNAMIC_TOPIC_CONFIG").
func (s Source) String() string {
	switch s {
	case SourceDynamicTopic:
		return "DYNAMIC_TOPIC_CONFIG"
	case SourceDynamicBroker:
		return "DYNAMIC_BROKER_CONFIG"
	case SourceDynamicDefaultBroker:
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case SourceStaticBroker:
		return "STATIC_BROKER_CONFIG"
	case SourceDefault:
		return "DEFAULT_CONFIG"
	}
	return "UNKNOWN"
}

// ConfigError is the error the validators return. It unwraps to ErrUnknownConfig,
// ErrInvalidValue or ErrReadOnly, and its message is meant for the ErrorMessage of an
// AlterConfigs/CreateTopics response.
type ConfigError struct {
	Err      error  // ErrUnknownConfig, ErrInvalidValue or ErrReadOnly
	Resource string // "topic" or "broker"
	Name     string // config name
	Value    string // offending value; "[hidden]" for a sensitive config
	Reason   string // why the value was refused (ErrInvalidValue only)
}

// Error formats the error the way Kafka words config errors, e.g.
// "Invalid value -5 for configuration retention.ms: Value must be at least -1".
func (e *ConfigError) Error() string {
	switch e.Err {
	case ErrUnknownConfig:
		return fmt.Sprintf("Unknown %s config name: %s", e.Resource, e.Name)
	case ErrReadOnly:
		return fmt.Sprintf("Cannot update %s config %s dynamically: it is read-only and only taken from the broker's config file", e.Resource, e.Name)
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Name, e.Reason)
}

// Unwrap returns the sentinel, for errors.Is.
func (e *ConfigError) Unwrap() error { return e.Err }

// value is a parsed config value. s is the canonical text form (what Describe reports);
// the other fields hold the typed value for the config's Type.
type value struct {
	s string
	n int64    // BOOLEAN is 0/1; INT, SHORT, LONG
	f float64  // DOUBLE
	l []string // LIST
}

func (v value) bool() bool { return v.n != 0 }

// parse turns raw text into a value of type t. The text is trimmed first, as Kafka does.
// On failure it returns a reason for a ConfigError.
func parse(t Type, raw string) (value, string) {
	s := strings.TrimSpace(raw)
	switch t {
	case TypeBoolean:
		switch strings.ToLower(s) {
		case "true":
			return value{s: "true", n: 1}, ""
		case "false":
			return value{s: "false"}, ""
		}
		return value{}, "Value must be true or false"
	case TypeShort, TypeInt, TypeLong:
		bits := 64
		if t == TypeShort {
			bits = 16
		} else if t == TypeInt {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return value{}, "Not a number of type " + t.String()
		}
		return value{s: strconv.FormatInt(n, 10), n: n}, ""
	case TypeDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return value{}, "Not a number of type DOUBLE"
		}
		return value{s: s, f: f}, ""
	case TypeList:
		if s == "" {
			return value{s: ""}, ""
		}
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return value{s: strings.Join(parts, ","), l: parts}, ""
	}
	// STRING, PASSWORD, CLASS: free text.
	return value{s: s}, ""
}

// check is a value constraint; it returns "" when v is acceptable, else the reason.
type check func(v value) string

func atLeast(min int64) check {
	return func(v value) string {
		if v.n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		return ""
	}
}

// queuedBytes accepts -1 (Kafka's unbounded) or a positive size.
func queuedBytes(v value) string {
	if v.n == -1 || v.n > 0 {
		return ""
	}
	return "Value must be -1 or at least 1"
}

func between(lo, hi int64) check {
	return func(v value) string {
		if v.n < lo {
			return fmt.Sprintf("Value must be at least %d", lo)
		}
		if v.n > hi {
			return fmt.Sprintf("Value must be at most %d", hi)
		}
		return ""
	}
}

func betweenFloat(lo, hi float64) check {
	return func(v value) string {
		if v.f < lo {
			return "Value must be at least " + strconv.FormatFloat(lo, 'f', -1, 64)
		}
		if v.f > hi {
			return "Value must be at most " + strconv.FormatFloat(hi, 'f', -1, 64)
		}
		return ""
	}
}

// noTieredStorage refuses remote.storage.enable=true: accepting it would promise a
// remote tier Sluice does not have (Kafka refuses it too when its broker's
// remote.log.storage.system.enable is false).
func noTieredStorage(v value) string {
	if v.bool() {
		return "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	}
	return ""
}

func oneOf(allowed ...string) check {
	return func(v value) string {
		for _, a := range allowed {
			if v.s == a {
				return ""
			}
		}
		return "Value must be one of: " + strings.Join(allowed, ", ")
	}
}

// listOf accepts a non-empty list whose elements are all in allowed.
func listOf(allowed ...string) check {
	one := oneOf(allowed...)
	return func(v value) string {
		if len(v.l) == 0 {
			return "List must not be empty; allowed elements: " + strings.Join(allowed, ", ")
		}
		for _, e := range v.l {
			if one(value{s: e}) != "" {
				return fmt.Sprintf("List element %q is not one of: %s", e, strings.Join(allowed, ", "))
			}
		}
		return ""
	}
}

// throttledReplicas accepts "", "*", or partition:broker pairs ("0:101,1:102").
func throttledReplicas(v value) string {
	if v.s == "*" {
		return ""
	}
	for _, e := range v.l {
		p, b, ok := strings.Cut(e, ":")
		if !ok || !isDigits(p) || !isDigits(b) {
			return "Value must be \"*\" or a list of partitionId:brokerId pairs, e.g. 0:101,1:102"
		}
	}
	return ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// gzipLevel accepts -1 (the codec's default) or 1 to 9.
func gzipLevel(v value) string {
	if v.n == -1 || (v.n >= 1 && v.n <= 9) {
		return ""
	}
	return "Value must be -1 or between 1 and 9"
}
