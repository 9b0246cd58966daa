package metadata

import (
	"context"
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Group configs (the GROUP config resource, KIP-848) are kept as extension records:
// namespace GroupConfigsNamespace, key the group id, value a JSON object of config name
// to string value ({"consumer.session.timeout.ms":"50000"}). A group with no config
// left has no key. The group coordinator reads them with
// im.Extension(GroupConfigsNamespace, group).
const GroupConfigsNamespace = "groups.configs"

// Group config names.
const (
	GroupConfigSessionTimeoutMs    = "consumer.session.timeout.ms"
	GroupConfigHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"
	// GroupConfigAssignor is Sluice's own: the name of the assignor the group uses. The
	// coordinator checks that it names a configured assignor; unset means the broker's
	// default order.
	GroupConfigAssignor = "sluice.consumer.assignor"

	// Share group configs (KIP-932, KIP-1240, KIP-1191).
	GroupConfigShareAutoOffsetReset  = "share.auto.offset.reset"
	GroupConfigShareIsolationLevel   = "share.isolation.level"
	GroupConfigShareLockDurationMs   = "share.record.lock.duration.ms"
	GroupConfigShareDeliveryLimit    = "share.delivery.count.limit"
	GroupConfigShareMaxRecordLocks   = "share.partition.max.record.locks"
	GroupConfigShareSessionTimeoutMs = "share.session.timeout.ms"
	GroupConfigShareHeartbeatMs      = "share.heartbeat.interval.ms"
	GroupConfigDeadLetterTopic       = "errors.deadletterqueue.topic.name"
	GroupConfigDeadLetterCopy        = "errors.deadletterqueue.copy.record.enable"
)

// Bounds of the group session timeout and heartbeat interval. Kafka takes them from
// the broker configs group.consumer.{min,max}.session.timeout.ms and
// group.consumer.{min,max}.heartbeat.interval.ms; Sluice's catalogue does not have
// those, so these are Kafka's defaults for them.
const (
	groupMinSessionTimeoutMs    = 45000
	groupMaxSessionTimeoutMs    = 60000
	groupMinHeartbeatIntervalMs = 5000
	groupMaxHeartbeatIntervalMs = 15000
	maxGroupAssignorLen         = 255
)

// sourceGroupConfig is DYNAMIC_GROUP_CONFIG (8), the source of a value set on the group.
const sourceGroupConfig = kconfig.Source(kmsg.ConfigSourceGroupConfig)

// groupConfigDef is one group config. broker names the broker config that supplies its
// default ("" for none: the default is "").
type groupConfigDef struct {
	name   string
	typ    kconfig.Type
	broker string
	doc    string
}

// groupConfigDefs, sorted by name.
var groupConfigDefs = []groupConfigDef{
	{GroupConfigHeartbeatIntervalMs, kconfig.TypeInt, "group.consumer.heartbeat.interval.ms",
		"Heartbeat interval given to the group's members; default group.consumer.heartbeat.interval.ms. Between 5000 and 15000 and less than consumer.session.timeout.ms."},
	{GroupConfigSessionTimeoutMs, kconfig.TypeInt, "group.consumer.session.timeout.ms",
		"Session timeout of the group's members; default group.consumer.session.timeout.ms. Between 45000 and 60000."},
	{GroupConfigDeadLetterCopy, kconfig.TypeBoolean, "",
		"Share groups: whether a record sent to the dead-letter topic keeps its key, value and headers (true) or is written as the context headers alone (false, the default)."},
	{GroupConfigDeadLetterTopic, kconfig.TypeString, "",
		"Share groups: the topic records go to when they reach the delivery count limit (created if missing). Empty: no dead-letter topic."},
	{GroupConfigShareAutoOffsetReset, kconfig.TypeString, "",
		"Share groups: where a share-partition without state starts: latest (the default), earliest, or by_duration:PnDTnHnMn.nS."},
	{GroupConfigShareDeliveryLimit, kconfig.TypeInt, "group.share.delivery.count.limit",
		"Share groups: deliveries of a record before it is archived; default group.share.delivery.count.limit. Between 2 and 10."},
	{GroupConfigShareHeartbeatMs, kconfig.TypeInt, "group.share.heartbeat.interval.ms",
		"Share groups: heartbeat interval given to members; default group.share.heartbeat.interval.ms. Between 5000 and 15000."},
	{GroupConfigShareIsolationLevel, kconfig.TypeString, "",
		"Share groups: read_uncommitted (the default) or read_committed (only committed transactional records are delivered)."},
	{GroupConfigShareMaxRecordLocks, kconfig.TypeInt, "group.share.partition.max.record.locks",
		"Share groups: most records of one share-partition acquired at once; default group.share.partition.max.record.locks. Between 100 and 10000."},
	{GroupConfigShareLockDurationMs, kconfig.TypeInt, "group.share.record.lock.duration.ms",
		"Share groups: how long a consumer holds an acquired record; default group.share.record.lock.duration.ms. Between 1000 and 3600000."},
	{GroupConfigShareSessionTimeoutMs, kconfig.TypeInt, "group.share.session.timeout.ms",
		"Share groups: session timeout of members; default group.share.session.timeout.ms. Between 45000 and 60000."},
	{GroupConfigAssignor, kconfig.TypeString, "",
		"Name of the server-side assignor the group uses; it must be one the broker is configured with. Empty: the broker's default order."},
}

func groupConfigDefOf(name string) *groupConfigDef {
	for i := range groupConfigDefs {
		if groupConfigDefs[i].name == name {
			return &groupConfigDefs[i]
		}
	}
	return nil
}

// validateGroupConfig checks one value and returns its canonical form.
func validateGroupConfig(name, raw string) (string, error) {
	invalid := func(reason string) error {
		return opErr(kerr.InvalidConfig, "Invalid value %s for configuration %s: %s", raw, name, reason)
	}
	s := strings.TrimSpace(raw)
	switch name {
	case GroupConfigSessionTimeoutMs, GroupConfigHeartbeatIntervalMs:
		lo, hi := int64(groupMinSessionTimeoutMs), int64(groupMaxSessionTimeoutMs)
		if name == GroupConfigHeartbeatIntervalMs {
			lo, hi = groupMinHeartbeatIntervalMs, groupMaxHeartbeatIntervalMs
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return "", invalid("Not a number of type INT")
		}
		if n < lo || n > hi {
			return "", invalid("Value must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10))
		}
		return strconv.FormatInt(n, 10), nil
	case GroupConfigShareLockDurationMs, GroupConfigShareDeliveryLimit, GroupConfigShareMaxRecordLocks,
		GroupConfigShareSessionTimeoutMs, GroupConfigShareHeartbeatMs:
		bounds := map[string][2]int64{
			GroupConfigShareLockDurationMs:   {1000, 3_600_000},
			GroupConfigShareDeliveryLimit:    {2, 10},
			GroupConfigShareMaxRecordLocks:   {100, 10_000},
			GroupConfigShareSessionTimeoutMs: {groupMinSessionTimeoutMs, groupMaxSessionTimeoutMs},
			GroupConfigShareHeartbeatMs:      {groupMinHeartbeatIntervalMs, groupMaxHeartbeatIntervalMs},
		}[name]
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return "", invalid("Not a number of type INT")
		}
		if n < bounds[0] || n > bounds[1] {
			return "", invalid("Value must be between " + strconv.FormatInt(bounds[0], 10) + " and " + strconv.FormatInt(bounds[1], 10))
		}
		return strconv.FormatInt(n, 10), nil
	case GroupConfigShareAutoOffsetReset:
		if s == "latest" || s == "earliest" || validISODuration(strings.TrimPrefix(s, "by_duration:")) && strings.HasPrefix(s, "by_duration:") {
			return s, nil
		}
		return "", invalid("Value must be latest, earliest or by_duration:PnDTnHnMn.nS")
	case GroupConfigShareIsolationLevel:
		if s == "read_uncommitted" || s == "read_committed" {
			return s, nil
		}
		return "", invalid("Value must be read_uncommitted or read_committed")
	case GroupConfigDeadLetterCopy:
		switch strings.ToLower(s) {
		case "true", "false":
			return strings.ToLower(s), nil
		}
		return "", invalid("Value must be true or false")
	case GroupConfigDeadLetterTopic:
		if len(s) > 249 {
			return "", invalid("Value must be a topic name of at most 249 characters")
		}
		return s, nil
	case GroupConfigAssignor:
		switch {
		case s == "":
			return "", invalid("Value must not be empty")
		case len(s) > maxGroupAssignorLen:
			return "", invalid("Value must be at most " + strconv.Itoa(maxGroupAssignorLen) + " bytes")
		}
		return s, nil
	}
	return "", opErr(kerr.InvalidConfig, "Unknown group config name: %s", name)
}

// groupConfigs decodes a group's stored configs; a missing or undecodable value gives
// an empty map.
func groupConfigs(im *kernel.Image, group string) map[string]string {
	out := map[string]string{}
	if v := im.Extension(GroupConfigsNamespace, group); len(v) > 0 {
		if err := json.Unmarshal(v, &out); err != nil {
			return map[string]string{}
		}
	}
	return out
}

// checkGroupName refuses an empty group name, as Kafka does (INVALID_REQUEST).
func checkGroupName(name string) error {
	if name == "" {
		return opErr(kerr.InvalidRequest, "group name must not be empty")
	}
	return nil
}

// describeGroupConfigs returns every group config of group with its value and source.
func (m *Module) describeGroupConfigs(ctx context.Context, req *kernel.Request, im *kernel.Image, static map[string]string, group string) ([]kconfig.Entry, error) {
	if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResGroup, group) {
		return nil, opErr(kerr.GroupAuthorizationFailed, "")
	}
	if err := checkGroupName(group); err != nil {
		return nil, err
	}
	set := groupConfigs(im, group)
	broker := kconfig.DescribeBroker(static, im.BrokerConfigs[""], im.BrokerConfigs[image.BrokerConfigKey(m.node.nodeID)])
	out := make([]kconfig.Entry, 0, len(groupConfigDefs))
	for _, d := range groupConfigDefs {
		e := kconfig.Entry{Name: d.name, Type: d.typ, Doc: d.doc, Source: kconfig.SourceDefault, Value: strPtr("")}
		var dflt *kconfig.Synonym
		if d.broker != "" {
			for _, b := range broker {
				if b.Name == d.broker {
					dflt = &kconfig.Synonym{Name: b.Name, Value: b.Value, Source: b.Source}
					e.Value = b.Value
				}
			}
		}
		if v, ok := set[d.name]; ok {
			e.Value, e.Source = strPtr(v), sourceGroupConfig
			e.Synonyms = append(e.Synonyms, kconfig.Synonym{Name: d.name, Value: strPtr(v), Source: sourceGroupConfig})
		}
		if dflt != nil {
			e.Synonyms = append(e.Synonyms, *dflt)
		}
		out = append(out, e)
	}
	return out, nil
}

// planGroupConfigEdit validates changes to a group's configs and returns the extension
// record that stores the result. ops have passed planConfigEdit's common checks.
func (m *Module) planGroupConfigEdit(ctx context.Context, req *kernel.Request, im *kernel.Image, group string, ops []configOp, replace bool) (image.Record, error) {
	if !req.Allowed(ctx, kernel.OpAlterConfigs, kernel.ResGroup, group) {
		return nil, opErr(kerr.GroupAuthorizationFailed, "")
	}
	if err := checkGroupName(group); err != nil {
		return nil, err
	}
	if len(group) > image.MaxExtensionNameLen {
		return nil, opErr(kerr.InvalidRequest, "group name of %d bytes: group configs can be set on names of at most %d bytes", len(group), image.MaxExtensionNameLen)
	}
	after := map[string]string{}
	if !replace {
		after = maps.Clone(groupConfigs(im, group))
	}
	for _, o := range ops {
		d := groupConfigDefOf(o.name)
		if d == nil {
			return nil, opErr(kerr.InvalidConfig, "Unknown group config name: %s", o.name)
		}
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			v, err := validateGroupConfig(o.name, *o.value)
			if err != nil {
				return nil, err
			}
			after[o.name] = v
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(after, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return nil, opErr(kerr.InvalidConfig, "config %s is not a list; APPEND and SUBTRACT apply to lists only", o.name)
		default:
			return nil, opErr(kerr.InvalidRequest, "unknown operation %d for config %s", o.op, o.name)
		}
	}
	if err := m.checkGroupHeartbeat(im, after); err != nil {
		return nil, err
	}
	return configsRecord(GroupConfigsNamespace, group, after)
}

// configsRecord is the extension record that stores a resource's configs as one JSON
// object (a group's, a client metrics subscription's); none left deletes the key.
func configsRecord(namespace, key string, after map[string]string) (image.Record, error) {
	rec := &image.ExtensionRecord{Namespace: namespace, Key: key}
	if len(after) == 0 {
		rec.Delete = true
		return rec, nil
	}
	v, err := json.Marshal(after) // keys sorted: equal configs give equal bytes
	if err != nil {
		return nil, err
	}
	rec.Value = v
	return rec, nil
}

// checkGroupHeartbeat: when the group sets its session timeout or heartbeat interval,
// the effective heartbeat interval must be less than the effective session timeout
// (unset ones come from the broker configs), as Kafka requires.
func (m *Module) checkGroupHeartbeat(im *kernel.Image, cfg map[string]string) error {
	hb, hbSet := cfg[GroupConfigHeartbeatIntervalMs]
	st, stSet := cfg[GroupConfigSessionTimeoutMs]
	if !hbSet && !stSet {
		return nil
	}
	broker := m.node.mergedBrokerConfigs(im)
	if !hbSet {
		hb = broker["group.consumer.heartbeat.interval.ms"]
	}
	if !stSet {
		st = broker["group.consumer.session.timeout.ms"]
	}
	h, err1 := strconv.ParseInt(hb, 10, 64)
	s, err2 := strconv.ParseInt(st, 10, 64)
	if err1 == nil && err2 == nil && h >= s {
		return opErr(kerr.InvalidConfig, "%s (%d) must be less than %s (%d)",
			GroupConfigHeartbeatIntervalMs, h, GroupConfigSessionTimeoutMs, s)
	}
	return nil
}

// validISODuration reports whether d is an ISO 8601 duration of days and time parts
// (PnDTnHnMn.nS), as share.auto.offset.reset's by_duration takes.
func validISODuration(d string) bool {
	if !strings.HasPrefix(d, "P") || len(d) < 3 {
		return false
	}
	inTime, num, any := false, false, false
	for _, r := range d[1:] {
		switch {
		case r == 'T' && !inTime && !num:
			inTime = true
		case r >= '0' && r <= '9' || r == '.' && num:
			num = true
		case num && (r == 'D' && !inTime || inTime && (r == 'H' || r == 'M' || r == 'S')):
			num, any = false, true
		default:
			return false
		}
	}
	return any && !num
}
