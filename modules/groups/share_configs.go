package groups

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/modules/groups/sharepart"
)

// Group configs of share groups (KIP-932, KIP-1240, KIP-1191), set with
// IncrementalAlterConfigs on the GROUP resource; the metadata module validates them.
const (
	ShareAutoOffsetResetConfig  = "share.auto.offset.reset"
	ShareIsolationLevelConfig   = "share.isolation.level"
	ShareLockDurationConfig     = "share.record.lock.duration.ms"
	ShareDeliveryLimitConfig    = "share.delivery.count.limit"
	ShareMaxRecordLocksConfig   = "share.partition.max.record.locks"
	ShareDeadLetterTopicConfig  = "errors.deadletterqueue.topic.name"
	ShareDeadLetterCopyConfig   = "errors.deadletterqueue.copy.record.enable"
	shareDefaultAutoOffsetReset = "latest"
)

// shareGroupConfig is what the share-partition leader needs of a share group's
// configs, with the broker's group.share.* defaults filled in.
type shareGroupConfig struct {
	part          sharepart.Config
	earliest      bool          // share.auto.offset.reset=earliest
	byDuration    time.Duration // share.auto.offset.reset=by_duration:..., 0 if not
	readCommitted bool          // share.isolation.level=read_committed
	dlqTopic      string        // errors.deadletterqueue.topic.name, "" for none
	dlqCopy       bool          // errors.deadletterqueue.copy.record.enable
}

// shareConfig returns group's share configs from the current image.
func (m *Module) shareConfig(group string) shareGroupConfig {
	set := m.settings.Load().share
	c := shareGroupConfig{part: sharepart.Config{
		LockDuration:  set.lockDuration,
		DeliveryLimit: set.deliveryLimit,
		MaxLocks:      set.maxRecordLocks,
	}}
	raw := m.meta.Image().Extension(GroupConfigsNamespace, group)
	if len(raw) == 0 {
		return c
	}
	var cfg map[string]string
	if json.Unmarshal(raw, &cfg) != nil {
		return c
	}
	num := func(name string, lo, hi int64) (int64, bool) {
		v, err := strconv.ParseInt(strings.TrimSpace(cfg[name]), 10, 64)
		return v, err == nil && v >= lo && v <= hi
	}
	if v, ok := num(ShareLockDurationConfig, 1000, 3_600_000); ok {
		c.part.LockDuration = time.Duration(v) * time.Millisecond
	}
	if v, ok := num(ShareDeliveryLimitConfig, 2, 10); ok {
		c.part.DeliveryLimit = int(v)
	}
	if v, ok := num(ShareMaxRecordLocksConfig, 100, 10_000); ok {
		c.part.MaxLocks = int(v)
	}
	switch reset := strings.TrimSpace(cfg[ShareAutoOffsetResetConfig]); {
	case reset == "earliest":
		c.earliest = true
	case strings.HasPrefix(reset, "by_duration:"):
		if d, ok := parseISODuration(strings.TrimPrefix(reset, "by_duration:")); ok {
			c.byDuration = d
		}
	}
	c.readCommitted = strings.TrimSpace(cfg[ShareIsolationLevelConfig]) == "read_committed"
	c.dlqTopic = strings.TrimSpace(cfg[ShareDeadLetterTopicConfig])
	c.dlqCopy = strings.TrimSpace(cfg[ShareDeadLetterCopyConfig]) == "true"
	return c
}

// parseISODuration parses the ISO 8601 durations share.auto.offset.reset takes
// (PnDTnHnMn.nS, days and time parts only, no negative values).
func parseISODuration(s string) (time.Duration, bool) {
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, false
	}
	s = s[1:]
	var d time.Duration
	inTime := false
	num := ""
	for _, r := range s {
		switch {
		case r == 'T':
			if inTime || num != "" {
				return 0, false
			}
			inTime = true
		case r >= '0' && r <= '9' || r == '.':
			num += string(r)
		default:
			if num == "" {
				return 0, false
			}
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v < 0 {
				return 0, false
			}
			var unit time.Duration
			switch {
			case r == 'D' && !inTime:
				unit = 24 * time.Hour
			case r == 'H' && inTime:
				unit = time.Hour
			case r == 'M' && inTime:
				unit = time.Minute
			case r == 'S' && inTime:
				unit = time.Second
			default:
				return 0, false
			}
			d += time.Duration(v * float64(unit))
			num = ""
		}
	}
	return d, num == ""
}
