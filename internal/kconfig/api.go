package kconfig

import "errors"

// STUB signatures: the config-catalogue work implements them.

// Source is where a described value comes from (kmsg DescribeConfigs ConfigSource values).
type Source int8

// Sources, with Kafka's wire values.
const (
	SourceUnknown              Source = 0
	SourceDynamicTopic         Source = 1 // DYNAMIC_TOPIC_CONFIG
	SourceDynamicBroker        Source = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefaultBroker Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceStaticBroker         Source = 4 // STATIC_BROKER_CONFIG
	SourceDefault              Source = 5 // DEFAULT_CONFIG
)

// Type is a config's type (kmsg ConfigType wire values: 1 BOOLEAN, 2 STRING, 3 INT,
// 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD).
type Type int8

// Entry is one described config, ready for a DescribeConfigs response.
type Entry struct {
	Name      string
	Value     *string // nil for a sensitive or unset value
	ReadOnly  bool
	Sensitive bool
	Source    Source
	Type      Type
	Doc       string
	Synonyms  []Synonym
}

// Synonym is a lower-precedence source of the same setting.
type Synonym struct {
	Name   string
	Value  *string
	Source Source
}

// Errors of validation. Messages name the config and the reason, for the response's
// error message.
var (
	// ErrUnknownConfig: the name is not a known config of that resource type.
	ErrUnknownConfig = errors.New("unknown config")
	// ErrInvalidValue: the value does not parse or is out of range.
	ErrInvalidValue = errors.New("invalid config value")
	// ErrReadOnly: the broker config cannot be changed dynamically.
	ErrReadOnly = errors.New("config cannot be updated dynamically")
)

// ValidateTopic checks one topic config name and value.
func ValidateTopic(name, value string) error { return nil }

// ValidateBroker checks one broker config for a dynamic update.
func ValidateBroker(name, value string) error { return nil }

// DescribeTopic returns every topic config with its effective value and source, given
// the topic's overrides and the broker configs: static (from the config file), dynamic
// cluster default, dynamic for this node.
func DescribeTopic(overrides, static, dynDefault, dynNode map[string]string) []Entry {
	return nil
}

// DescribeBroker returns every broker config with its effective value and source.
func DescribeBroker(static, dynDefault, dynNode map[string]string) []Entry { return nil }
