// Package clientmetrics is the model of KIP-714's client metrics subscriptions: the
// CLIENT_METRICS config resources an operator sets (which metrics, how often, from
// which clients) and the matching of a client against them. The metadata module
// validates and stores the configs (extension records, namespace Namespace, key the
// subscription name, value a JSON object of config name to value); the telemetry
// module reads them from the image and answers GetTelemetrySubscriptions with them.
//
// Configs (Kafka's names and defaults):
//
//	metrics      list of metric name prefixes; "*" is every metric; empty: none
//	interval.ms  push interval, 100 to 3600000 (default 300000)
//	match        list of key=regex selectors, all of which must match; empty: every
//	             client. Keys: client_instance_id, client_id, client_software_name,
//	             client_software_version, client_source_address, client_source_port.
//
// A regex must match the whole value (as Java's Matcher.matches). Go's regexp runs in
// time linear in the input, so a hostile pattern cannot stall a broker.
package clientmetrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// Namespace is the extension namespace of the subscriptions.
const Namespace = "clientmetrics.configs"

// Config names.
const (
	ConfigMetrics  = "metrics"
	ConfigInterval = "interval.ms"
	ConfigMatch    = "match"
)

// Interval bounds and default, in milliseconds (Kafka's).
const (
	DefaultIntervalMs = 300_000
	MinIntervalMs     = 100
	MaxIntervalMs     = 3_600_000
)

// maxPattern bounds one selector's regex.
const maxPattern = 1024

// Match keys.
const (
	MatchInstanceID      = "client_instance_id"
	MatchClientID        = "client_id"
	MatchSoftwareName    = "client_software_name"
	MatchSoftwareVersion = "client_software_version"
	MatchSourceAddress   = "client_source_address"
	MatchSourcePort      = "client_source_port"
)

var matchKeys = []string{MatchInstanceID, MatchClientID, MatchSoftwareName, MatchSoftwareVersion, MatchSourceAddress, MatchSourcePort}

// ErrInvalid marks an invalid config name or value.
var ErrInvalid = errors.New("invalid client metrics config")

// Names are the config names, sorted.
func Names() []string { return []string{ConfigInterval, ConfigMatch, ConfigMetrics} }

// Default is a config's default value.
func Default(name string) string {
	if name == ConfigInterval {
		return strconv.Itoa(DefaultIntervalMs)
	}
	return ""
}

// Doc is a config's description.
func Doc(name string) string {
	switch name {
	case ConfigMetrics:
		return `Metric name prefixes the matching clients push; "*" is every metric, empty is none.`
	case ConfigInterval:
		return "How often the matching clients push, in milliseconds: 100 to 3600000."
	case ConfigMatch:
		return "key=regex selectors, all of which a client must match (whole values); keys: " + strings.Join(matchKeys, ", ") + ". Empty: every client."
	}
	return ""
}

// Known reports whether name is a config.
func Known(name string) bool { return slices.Contains(Names(), name) }

// Validate checks one value and returns its canonical form (lists trimmed and joined
// with commas).
func Validate(name, value string) (string, error) {
	invalid := func(reason string) error {
		return fmt.Errorf("%w: Invalid value %s for configuration %s: %s", ErrInvalid, value, name, reason)
	}
	switch name {
	case ConfigInterval:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return "", invalid("Not a number of type INT")
		}
		if n < MinIntervalMs || n > MaxIntervalMs {
			return "", invalid(fmt.Sprintf("Value must be between %d and %d", MinIntervalMs, MaxIntervalMs))
		}
		return strconv.FormatInt(n, 10), nil
	case ConfigMetrics:
		return strings.Join(splitList(value), ","), nil
	case ConfigMatch:
		items := splitList(value)
		seen := map[string]bool{}
		for _, it := range items {
			k, re, ok := strings.Cut(it, "=")
			k = strings.TrimSpace(k)
			switch {
			case !ok || !slices.Contains(matchKeys, k):
				return "", invalid(fmt.Sprintf("%q is not key=regex with a key among %s", it, strings.Join(matchKeys, ", ")))
			case seen[k]:
				return "", invalid(fmt.Sprintf("%s is selected twice", k))
			case len(re) > maxPattern:
				return "", invalid(fmt.Sprintf("the pattern of %s is longer than %d bytes", k, maxPattern))
			}
			seen[k] = true
			if _, err := compile(re); err != nil {
				return "", invalid(fmt.Sprintf("the pattern of %s does not compile: %v", k, err))
			}
		}
		return strings.Join(items, ","), nil
	}
	return "", fmt.Errorf("%w: Unknown client metrics config name: %s", ErrInvalid, name)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func compile(re string) (*regexp.Regexp, error) { return regexp.Compile("^(?:" + re + ")$") }

// Subscription is one CLIENT_METRICS resource.
type Subscription struct {
	Name       string
	Metrics    []string // name prefixes; "" is every metric
	IntervalMs int32
	match      map[string]*regexp.Regexp
}

// Client is what a subscription selects on.
type Client struct {
	InstanceID, ClientID, SoftwareName, SoftwareVersion, SourceAddress, SourcePort string
}

func (c Client) value(key string) string {
	switch key {
	case MatchInstanceID:
		return c.InstanceID
	case MatchClientID:
		return c.ClientID
	case MatchSoftwareName:
		return c.SoftwareName
	case MatchSoftwareVersion:
		return c.SoftwareVersion
	case MatchSourceAddress:
		return c.SourceAddress
	case MatchSourcePort:
		return c.SourcePort
	}
	return ""
}

// Matches reports whether every selector of s matches c.
func (s *Subscription) Matches(c Client) bool {
	for k, re := range s.match {
		if !re.MatchString(c.value(k)) {
			return false
		}
	}
	return true
}

// Parse builds the subscription name from its stored configs.
func Parse(name string, configs map[string]string) (Subscription, error) {
	s := Subscription{Name: name, IntervalMs: DefaultIntervalMs, match: map[string]*regexp.Regexp{}}
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v, err := Validate(k, configs[k])
		if err != nil {
			return Subscription{}, err
		}
		switch k {
		case ConfigInterval:
			n, _ := strconv.ParseInt(v, 10, 32)
			s.IntervalMs = int32(n)
		case ConfigMetrics:
			for _, m := range splitList(v) {
				if m == "*" {
					m = ""
				}
				s.Metrics = append(s.Metrics, m)
			}
		case ConfigMatch:
			for _, it := range splitList(v) {
				key, re, _ := strings.Cut(it, "=")
				s.match[strings.TrimSpace(key)], _ = compile(re)
			}
		}
	}
	return s, nil
}

// Decode reads a stored value (the JSON object of one subscription's configs).
func Decode(v []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(v) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return out, nil
}

// Load returns the image's subscriptions sorted by name; undecodable ones (which
// validation keeps out of the log) are skipped and named in bad.
func Load(im *kernel.Image) (subs []Subscription, bad []string) {
	ns := im.Extensions[Namespace]
	for _, name := range slices.Sorted(maps.Keys(ns)) {
		cfg, err := Decode(ns[name])
		if err == nil {
			var s Subscription
			if s, err = Parse(name, cfg); err == nil {
				subs = append(subs, s)
				continue
			}
		}
		bad = append(bad, name)
	}
	return subs, bad
}
