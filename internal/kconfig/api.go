package kconfig

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/kernel/suggest"
)

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
// 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD; see the Type constants).
type Type int8

// Entry is one described config, ready for a DescribeConfigs response. Synonyms is always
// filled; a handler clears it when the request did not ask for synonyms, and clears Doc
// when it did not ask for documentation.
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

// Synonym is one source of the same setting, listed in precedence order: the entry's own
// value first (when set anywhere), then lower-precedence sources and configs.
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

// ValidateTopic checks one topic config name and value. The error is a *ConfigError
// wrapping ErrUnknownConfig or ErrInvalidValue.
func ValidateTopic(name, value string) error {
	if d := cat.topicByName[name]; d != nil {
		return validate(&d.def, "topic", name, value, false)
	}
	return &ConfigError{Err: ErrUnknownConfig, Resource: "topic", Name: name, Value: value}
}

// validate checks value for config name of resource ("topic" or "broker") against d,
// its catalogue entry. readOnly: the value is a dynamic update of a config that can
// only come from the config file, refused.
func validate(d *def, resource, name, value string, readOnly bool) error {
	if readOnly {
		return &ConfigError{Err: ErrReadOnly, Resource: resource, Name: name, Value: value}
	}
	if _, reason := d.parse(value); reason != "" {
		return d.invalid(resource, value, reason)
	}
	return nil
}

// ValidateBroker checks one broker config for a dynamic update (per node or cluster-wide
// default). The error is a *ConfigError wrapping ErrUnknownConfig, ErrReadOnly (the
// config can only come from the config file) or ErrInvalidValue.
func ValidateBroker(name, value string) error {
	if d := cat.brokerBy[name]; d != nil {
		return validate(&d.def, "broker", name, value, !d.dynamic)
	}
	if _, _, ok := splitListenerJAAS(name); ok {
		return &ConfigError{Err: ErrReadOnly, Resource: "broker", Name: name, Value: "[hidden]"}
	}
	if splitListenerScoped(name) != nil {
		return &ConfigError{Err: ErrReadOnly, Resource: "broker", Name: name, Value: value}
	}
	return &ConfigError{Err: ErrUnknownConfig, Resource: "broker", Name: name, Value: value}
}

// DescribeTopic returns every topic config with its effective value and source, given
// the topic's overrides and the broker configs: static (from the config file), dynamic
// cluster default, dynamic for this node. Entries are sorted by name. The effective
// values are the ones ResolveTopic(overrides, MergeBroker(static, dynDefault, dynNode))
// uses.
func DescribeTopic(overrides, static, dynDefault, dynNode map[string]string) []Entry {
	return describeTopic(overrides, brokerLayers(static, dynDefault, dynNode))
}

// DescribeBroker returns every broker config with its effective value and source, sorted
// by name. A config that is unset and has no default has a nil Value and DEFAULT_CONFIG
// as its source; a sensitive (PASSWORD) config has a nil Value wherever it is set, and
// so do its synonyms. Dynamic values of read-only configs, and invalid values, are
// ignored, as MergeBroker ignores them.
func DescribeBroker(static, dynDefault, dynNode map[string]string) []Entry {
	return describeBroker(brokerLayers(static, dynDefault, dynNode))
}

// IsTopicConfig reports whether name is a topic config.
func IsTopicConfig(name string) bool { return cat.topicByName[name] != nil }

// IsBrokerConfig reports whether name is a broker config.
// That includes the listener-prefixed SASL credentials (ListenerJAASConfig), which
// only the config file sets and which DescribeBroker never lists.
func IsBrokerConfig(name string) bool {
	_, _, jaas := splitListenerJAAS(name)
	return cat.brokerBy[name] != nil || jaas || splitListenerScoped(name) != nil
}

// ListenerJAASConfig is the name of the config holding this broker's own SASL
// credentials for mechanism mech on listener, Kafka's
// listener.name.<listener lower-case>.<mechanism lower-case>.sasl.jaas.config, e.g.
// listener.name.internal.scram-sha-512.sasl.jaas.config. Its value (ParseJAAS) is a
// password: static only, never described.
func ListenerJAASConfig(listener, mech string) string {
	return "listener.name." + strings.ToLower(listener) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
}

// splitListenerJAAS splits a ListenerJAASConfig name; ok is false for any other name,
// and for mechanisms other than PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.
func splitListenerJAAS(name string) (listener, mech string, ok bool) {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, ".sasl.jaas.config")
	if !ok {
		return "", "", false
	}
	listener, mech, ok = strings.Cut(rest, ".")
	if !ok || listener == "" {
		return "", "", false
	}
	for i := 0; i < len(listener); i++ {
		c := listener[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", "", false
		}
	}
	switch mech {
	case "plain", "scram-sha-256", "scram-sha-512":
		return listener, mech, true
	}
	return "", "", false
}

// IsDynamicBrokerConfig reports whether name is a broker config that can be changed at
// runtime (for one node or as the cluster-wide default).
func IsDynamicBrokerConfig(name string) bool {
	d := cat.brokerBy[name]
	return d != nil && d.dynamic
}

// TopicConfigType returns the type of a topic config (for IncrementalAlterConfigs
// APPEND/SUBTRACT, which apply to LIST configs only).
func TopicConfigType(name string) (Type, bool) {
	if d := cat.topicByName[name]; d != nil {
		return d.typ, true
	}
	return TypeUnknown, false
}

// BrokerConfigType returns the type of a broker config.
func BrokerConfigType(name string) (Type, bool) {
	if d := cat.brokerBy[name]; d != nil {
		return d.typ, true
	}
	if _, _, ok := splitListenerJAAS(name); ok {
		return TypePassword, true
	}
	if d := splitListenerScoped(name); d != nil {
		return d.typ, true
	}
	return TypeUnknown, false
}

// TopicConfigNames returns the names of all topic configs, sorted.
func TopicConfigNames() []string {
	out := make([]string, 0, len(cat.topics))
	for _, t := range cat.topics {
		out = append(out, t.name)
	}
	return out
}

// BrokerConfigNames returns the names of all broker configs, sorted.
func BrokerConfigNames() []string {
	out := make([]string, 0, len(cat.brokers))
	for _, b := range cat.brokers {
		out = append(out, b.name)
	}
	return out
}

// listenerScoped are the broker configs a listener may set for itself as
// listener.name.<listener lower-case>.<config>.
var listenerScoped = []string{"max.connections", "max.connection.creation.rate"}

// splitListenerScoped returns the catalogue entry a listener.name.<l>.<config> name
// refines (max.connections, max.connection.creation.rate), or nil.
func splitListenerScoped(name string) *brokerDef {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return nil
	}
	for _, base := range listenerScoped {
		if l, ok := strings.CutSuffix(rest, "."+base); ok && l != "" && !strings.Contains(l, ".") {
			return cat.brokerBy[base]
		}
	}
	return nil
}

// ValidateStaticBroker checks one broker config from the config file: the name must be
// known and the value valid; read-only configs are fine. Listener-scoped limits
// (listener.name.<l>.max.connections, ...) are checked like the config they refine.
func ValidateStaticBroker(name, value string) error {
	if d := cat.brokerBy[name]; d != nil {
		return validate(&d.def, "broker", name, value, false)
	}
	if d := splitListenerScoped(name); d != nil {
		return validate(&d.def, "broker", name, value, false)
	}
	if _, mech, ok := splitListenerJAAS(name); ok {
		j, err := ParseJAAS(value)
		reason := ""
		switch {
		case err != nil:
			reason = err.Error()
		case !j.Mechanism(mech):
			reason = fmt.Sprintf("login module %s does not serve %s", j.LoginModule, strings.ToUpper(mech))
		}
		if reason != "" {
			return &ConfigError{Err: ErrInvalidValue, Resource: "broker", Name: name, Value: "[hidden]", Reason: reason}
		}
		return nil
	}
	return &ConfigError{Err: ErrUnknownConfig, Resource: "broker", Name: name, Value: value}
}

// ValidateStaticBrokers checks every config of the config file's `configs:` section
// and reports all the problems at once (a kernel.ConfigErrors, in name order), an unknown name
// with the known name it probably meant ("did you mean ...?"). Nil when all are fine.
func ValidateStaticBrokers(configs map[string]string) error {
	var errs []error
	var names []string
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		err := ValidateStaticBroker(name, configs[name])
		if err == nil {
			continue
		}
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Err == ErrUnknownConfig {
			if names == nil {
				names = BrokerConfigNames()
			}
			err = fmt.Errorf("%w%s", err, suggest.Hint(name, names))
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return kernel.ConfigErrors(errs)
}

// ValidateTopicConfigs checks a topic's complete set of overrides, as CreateTopics and
// (non-incremental) AlterConfigs carry them: each one with ValidateTopic, in name order,
// then the rules that span configs, resolved against the merged broker configs:
// min.compaction.lag.ms must not exceed max.compaction.lag.ms. It returns the first
// problem found.
func ValidateTopicConfigs(overrides, broker map[string]string) error {
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := ValidateTopic(n, overrides[n]); err != nil {
			return err
		}
	}
	eff := effectiveTopic(overrides, []layer{{SourceStaticBroker, broker}})
	minLag, maxLag := eff["min.compaction.lag.ms"], eff["max.compaction.lag.ms"]
	if minLag.n > maxLag.n {
		// Blame the override the request set: min unless only max was given.
		if _, setMin := overrides["min.compaction.lag.ms"]; !setMin {
			return cat.topicByName["max.compaction.lag.ms"].invalid("topic", maxLag.s,
				"Value must not be less than min.compaction.lag.ms ("+minLag.s+")")
		}
		return cat.topicByName["min.compaction.lag.ms"].invalid("topic", minLag.s,
			"Value must not be greater than max.compaction.lag.ms ("+maxLag.s+")")
	}
	return nil
}
