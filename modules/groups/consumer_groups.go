// The KIP-848 consumer group protocol (68_consumer_group_heartbeat.go,
// 69_consumer_group_describe.go). The state machine is modules/groups/consumer; the
// server-side assignors are the module's `assignors` (modules/groups/assignor).
// Classic-protocol members inside consumer groups, and moving a group between the
// protocols (group.consumer.migration.policy), are in migration.go.

package groups

import (
	"encoding/json"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// imageTopics is a consumer.TopicView over one metadata image. With m set it is
// also a consumer.TopicStats (end offsets and lag for assignor plugins), a
// consumer.TopicRacks (replica racks, also for plugins) and a
// consumer.GroupAssignors (the group config sluice.consumer.assignor).
type imageTopics struct {
	im *kernel.Image
	m  *Module
}

// topicView returns the consumer.TopicView of the current metadata image.
func (m *Module) topicView() imageTopics { return imageTopics{m.meta.Image(), m} }

// GroupConfigsNamespace is the metadata extension namespace of group configs
// (IncrementalAlterConfigs on GROUP resources): key group id, value a JSON object
// of config name → value.
const GroupConfigsNamespace = "groups.configs"

// GroupAssignorConfig is the group config naming a group's server-side assignor; when
// set it wins over the assignor a KIP-848 member names, and classic-protocol members
// are assigned by it on the coordinator too (classic_assign.go).
const GroupAssignorConfig = "sluice.consumer.assignor"

// logAssignorChosen logs, at info, which assignor computes a group's assignment
// and why, each time that changes (consumer.Config.OnAssignorChosen).
func (m *Module) logAssignorChosen(group, assignor, why string) {
	m.log.Info("group assignor chosen", "group", group, "assignor", assignor, "why", why)
}

// GroupAssignor implements consumer.GroupAssignors: the group's
// sluice.consumer.assignor if it names a configured assignor; else "" (an unknown
// name is logged once per group and value, and the default is used).
func (v imageTopics) GroupAssignor(group string) string {
	if v.m == nil {
		return ""
	}
	raw := v.im.Extension(GroupConfigsNamespace, group)
	if len(raw) == 0 {
		return ""
	}
	var cfg map[string]string
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return ""
	}
	name := cfg[GroupAssignorConfig]
	if name == "" {
		return ""
	}
	for _, a := range v.m.assignors {
		if a.Name() == name {
			return name
		}
	}
	if _, logged := v.m.groupCfgLogged.LoadOrStore(group+"\x00"+name, true); !logged {
		v.m.log.Warn("group config names an assignor that is not configured; using the default",
			"group", group, "config", GroupAssignorConfig, "assignor", name, "default", v.m.assignors[0].Name())
	}
	return ""
}

// PartitionStats implements consumer.TopicStats from the replication module's
// offsets (kernel.PartitionOffsets) and the group's committed offsets.
func (v imageTopics) PartitionStats(group string, id assignor.TopicID, partitions int32) (ends, lag []int64, ok bool) {
	if v.m == nil || v.m.poffs == nil || partitions <= 0 {
		return nil, nil, false
	}
	t := v.im.TopicByID(id)
	if t == nil {
		return nil, nil, false
	}
	ends, lag = make([]int64, partitions), make([]int64, partitions)
	for p := range partitions {
		ends[p], lag[p] = -1, -1
		logStart, hw, led := v.m.poffs.Offsets(kernel.TopicPartition{Topic: t.Name, Partition: p})
		if !led {
			continue
		}
		ends[p], lag[p] = hw, max(hw-logStart, 0)
		if v.m.store != nil {
			if c, found, err := v.m.store.Fetch(group, t.Name, p); err == nil && found && c.Offset >= 0 {
				lag[p] = max(hw-c.Offset, 0)
			}
		}
	}
	return ends, lag, true
}

// PartitionRacks implements consumer.TopicRacks from the image: each
// partition's replicas' broker racks, brokers without a rack (or unknown to the
// image) skipped. ok is false when no replica of the topic has a rack.
func (v imageTopics) PartitionRacks(id assignor.TopicID, partitions int32) (racks [][]string, ok bool) {
	t := v.im.TopicByID(id)
	if t == nil || partitions <= 0 || int(partitions) != len(t.Partitions) {
		return nil, false
	}
	racks = make([][]string, partitions)
	for p, pi := range t.Partitions {
		for _, r := range pi.Replicas {
			b := v.im.Brokers[r]
			if b == nil || b.Rack == "" || slices.Contains(racks[p], b.Rack) {
				continue
			}
			racks[p] = append(racks[p], b.Rack)
			ok = true
		}
	}
	if !ok {
		return nil, false
	}
	return racks, true
}

func (v imageTopics) TopicByName(name string) (assignor.TopicID, int32, bool) {
	t := v.im.Topic(name)
	if t == nil {
		return assignor.TopicID{}, 0, false
	}
	return assignor.TopicID(t.ID), int32(len(t.Partitions)), true
}

func (v imageTopics) TopicByID(id assignor.TopicID) (string, int32, bool) {
	t := v.im.TopicByID(id)
	if t == nil {
		return "", 0, false
	}
	return t.Name, int32(len(t.Partitions)), true
}

func (v imageTopics) TopicNames() []string {
	out := make([]string, 0, v.im.NumTopics())
	for name := range v.im.Topics() {
		out = append(out, name)
	}
	return out
}

// describeConsumerAsClassic answers DescribeGroups for a KIP-848 group the way Kafka 4
// does: protocol type "consumer", the group state, and each member with its client id
// and host and its current assignment encoded as a classic ConsumerMemberAssignment
// (so admin tools compute lag per member).
func (m *Module) describeConsumerAsClassic(g *group, d kmsg.DescribeGroupsResponseGroup) kmsg.DescribeGroupsResponseGroup {
	im := m.meta.Image()
	d.State = g.consumer.State().String()
	d.ProtocolType = "consumer"
	for _, mb := range g.consumer.Members() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID = mb.ID
		if mb.InstanceID != "" {
			iid := mb.InstanceID
			dm.InstanceID = &iid
		}
		dm.ClientID, dm.ClientHost = mb.ClientID, mb.ClientHost
		var a kmsg.ConsumerMemberAssignment
		for id, ps := range mb.Assigned {
			t := im.TopicByID(id)
			if t == nil {
				continue
			}
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t.Name, append([]int32(nil), ps...)
			a.Topics = append(a.Topics, at)
		}
		dm.MemberAssignment = a.AppendTo(nil)
		if len(mb.ClassicProtocols) > 0 {
			dm.ProtocolMetadata = mb.ClassicProtocols[0].Metadata
		} else {
			var md kmsg.ConsumerMemberMetadata
			md.Topics = mb.SubscribedTopicNames
			dm.ProtocolMetadata = md.AppendTo(nil)
		}
		d.Members = append(d.Members, dm)
	}
	return d
}
