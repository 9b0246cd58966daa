package metadata

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// withTimeout bounds ctx by a request's timeout_ms when it is positive.
func withTimeout(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// counts returns how often each key occurs.
func counts[T comparable](keys []T) map[T]int {
	c := make(map[T]int, len(keys))
	for _, k := range keys {
		c[k]++
	}
	return c
}

// describeTopicConfigs describes a topic's configs (CreateTopics v5+, DescribeConfigs).
func (nd *node) describeTopicConfigs(im *kernel.Image, overrides map[string]string) []kconfig.Entry {
	return kconfig.DescribeTopic(overrides, nd.kctx.Broker().StaticConfigs, im.BrokerConfigs[""], im.BrokerConfigs[image.BrokerConfigKey(nd.nodeID)])
}

// createTopicsResp serves CreateTopics.
func (m *Module) createTopicsResp(ctx context.Context, req *kernel.Request, r *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = r.Version
	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, len(r.Topics))
	names := make([]string, len(r.Topics))
	for i, t := range r.Topics {
		names[i] = t.Topic
	}
	dups := counts(names)
	var trs []topicRequest
	var at []int
	for i, t := range r.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		var err error
		switch {
		case dups[t.Topic] > 1:
			err = opErr(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Topic)
		case !mayCreateTopic(ctx, req, t.Topic):
			err = opErr(kerr.TopicAuthorizationFailed, "")
		default:
			var tr topicRequest
			if tr, err = parseCreateTopic(t); err == nil {
				trs = append(trs, tr)
				at = append(at, i)
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err)
		resp.Topics[i] = rt
	}
	if !r.ValidateOnly {
		// controller_mutation_rate, topic by topic in request order (quotas.go).
		charge := m.mutationCharge(req, r.Version >= 6)
		defaultParts := int(m.node.brokerSettings(m.node.hub.image()).NumPartitions)
		kept, keptAt := trs[:0], at[:0]
		for j, tr := range trs {
			cost := int(tr.NumPartitions)
			if cost <= 0 {
				cost = len(tr.Assignment)
			}
			if cost <= 0 {
				cost = defaultParts
			}
			if err := charge.admit(cost); err != nil {
				rt := &resp.Topics[at[j]]
				rt.ErrorCode, rt.ErrorMessage = errCode(err)
				continue
			}
			kept, keptAt = append(kept, tr), append(keptAt, at[j])
		}
		trs, at = kept, keptAt
		resp.ThrottleMillis = charge.millis()
	}
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()
	im, plans, errs := m.createTopics(ctx, trs, r.ValidateOnly)
	for j, i := range at {
		rt := &resp.Topics[i]
		if errs[j] != nil {
			rt.ErrorCode, rt.ErrorMessage = errCode(errs[j])
			continue
		}
		p := plans[j]
		if !r.ValidateOnly {
			rt.TopicID = p.ID
		}
		if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResTopic, rt.Topic) {
			// As Kafka: the topic is created, but its partition count, replication
			// factor and configs are shown only to who may describe its configs.
			rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			continue
		}
		rt.NumPartitions, rt.ReplicationFactor = int32(len(p.Partitions)), int16(len(p.Partitions[0].Replicas))
		for _, e := range m.node.describeTopicConfigs(im, p.Configs) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.Value, e.ReadOnly, int8(e.Source), e.Sensitive
			rt.Configs = append(rt.Configs, c)
		}
	}
	return resp
}

// parseCreateTopic turns a request topic into a topicRequest, checking what needs no
// image: config names unique and non-null, assignment partitions unique.
func parseCreateTopic(t kmsg.CreateTopicsRequestTopic) (topicRequest, error) {
	tr := topicRequest{Name: t.Topic, NumPartitions: t.NumPartitions, RF: t.ReplicationFactor}
	for _, c := range t.Configs {
		if tr.Configs == nil {
			tr.Configs = map[string]string{}
		}
		if _, dup := tr.Configs[c.Name]; dup {
			return tr, opErr(kerr.InvalidRequest, "config %s appears more than once", c.Name)
		}
		if c.Value == nil {
			return tr, opErr(kerr.InvalidConfig, "null value for config %s", c.Name)
		}
		tr.Configs[c.Name] = *c.Value
	}
	for _, a := range t.ReplicaAssignment {
		if tr.Assignment == nil {
			tr.Assignment = map[int32][]int32{}
		}
		if _, dup := tr.Assignment[a.Partition]; dup {
			return tr, opErr(kerr.InvalidReplicaAssignment, "partition %d is assigned more than once", a.Partition)
		}
		tr.Assignment[a.Partition] = a.Replicas
	}
	return tr, nil
}

// deleteTopicsResp serves DeleteTopics.
func (m *Module) deleteTopicsResp(ctx context.Context, req *kernel.Request, r *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = r.Version
	wanted := r.Topics
	if r.Version < 6 {
		wanted = nil
		for _, name := range r.TopicNames {
			wanted = append(wanted, kmsg.DeleteTopicsRequestTopic{Topic: strPtr(name)})
		}
	}
	im := m.node.hub.image()
	settings := m.node.brokerSettings(im)
	// Resolve every entry to a topic first, so duplicates by name or id are found.
	topics := make([]*kernel.TopicImage, len(wanted))
	keys := make([]string, len(wanted))
	invalid := make([]error, len(wanted)) // as Kafka: a name or an id, exactly one
	for i, w := range wanted {
		if w.Topic != nil && *w.Topic == "" && w.TopicID != [16]byte{} {
			w.Topic = nil
			wanted[i] = w
		}
		switch {
		case w.Topic != nil && w.TopicID != [16]byte{}:
			invalid[i] = opErr(kerr.InvalidRequest, "a topic may be named by name or by id, not both")
		case w.Topic == nil && w.TopicID == [16]byte{}:
			invalid[i] = opErr(kerr.InvalidRequest, "neither a topic name nor a topic id was given")
		}
		if invalid[i] != nil {
			keys[i] = "x:" + strconv.Itoa(i) // never a duplicate of another entry
			continue
		}
		if w.Topic != nil {
			topics[i], keys[i] = im.Topic(*w.Topic), "n:"+*w.Topic
		} else {
			topics[i], keys[i] = im.TopicByID(w.TopicID), "i:"+image.UUID(w.TopicID).String()
		}
		if topics[i] != nil {
			keys[i] = "n:" + topics[i].Name
		}
	}
	dups := counts(keys)
	ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
	defer cancel()
	charge := m.mutationCharge(req, r.Version >= 5)
	defer func() { resp.ThrottleMillis = charge.millis() }()
	var recs []image.Record
	var at []int
	for i, w := range wanted {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = w.Topic, w.TopicID
		t := topics[i]
		if t != nil {
			rt.Topic, rt.TopicID = strPtr(t.Name), t.ID
		}
		var err error
		switch {
		case invalid[i] != nil:
			err = invalid[i]
		case dups[keys[i]] > 1:
			err = opErr(kerr.InvalidRequest, "topic appears more than once in the request")
		case t == nil && w.Topic == nil:
			err = opErr(kerr.UnknownTopicID, "")
		case w.Topic == nil && !mayDeleteTopic(ctx, req, t.Name):
			// As Kafka: an id is not secret, its name is unless it may be described.
			if !mayDescribeForDelete(ctx, req, t.Name) {
				rt.Topic = nil
			}
			err = opErr(kerr.TopicAuthorizationFailed, "")
		case w.Topic != nil && !mayDescribeForDelete(ctx, req, *w.Topic):
			err = opErr(kerr.TopicAuthorizationFailed, "")
		case t == nil:
			err = opErr(kerr.UnknownTopicOrPartition, "")
		case !mayDeleteTopic(ctx, req, t.Name):
			err = opErr(kerr.TopicAuthorizationFailed, "")
		case !settings.DeleteTopicEnable && r.Version >= 3:
			err = opErr(kerr.TopicDeletionDisabled, "")
		case !settings.DeleteTopicEnable:
			err = opErr(kerr.InvalidRequest, "topic deletion is disabled (delete.topic.enable=false)")
		case t.Internal:
			err = opErr(kerr.InvalidRequest, "internal topic %s cannot be deleted", t.Name)
		default:
			// controller_mutation_rate: a topic's partitions (quotas.go).
			if err = charge.admit(len(t.Partitions)); err != nil {
				break
			}
			recs = append(recs, &image.DeleteTopicRecord{Name: t.Name, ID: t.ID})
			at = append(at, len(resp.Topics))
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if len(recs) > 0 {
		_, errs := m.node.proposeAll(ctx, recs)
		for j, i := range at {
			resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = errCode(errs[j])
		}
	}
	if r.Version < 5 {
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = nil
		}
	}
	return resp
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

// createPartitionsResp serves CreatePartitions.
func (m *Module) createPartitionsResp(ctx context.Context, req *kernel.Request, r *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.Version = r.Version
	names := make([]string, len(r.Topics))
	for i, t := range r.Topics {
		names[i] = t.Topic
	}
	dups := counts(names)
	recs, at, stale := m.planCreatePartitions(ctx, req, r, resp, dups)
	// This broker's image may trail the controller's (a topic or broker created a moment
	// ago through another broker): plan again on what the controller has.
	if m.node.replanAfterCatchUp(ctx, stale) {
		resp.Topics = resp.Topics[:0]
		recs, at, _ = m.planCreatePartitions(ctx, req, r, resp, dups)
	}
	// controller_mutation_rate: the partitions each topic gains (quotas.go).
	charge := m.mutationCharge(req, r.Version >= 3)
	kept, keptAt := recs[:0], at[:0]
	for j, rec := range recs {
		if err := charge.admit(len(rec.(*image.CreatePartitionsRecord).Partitions)); err != nil {
			resp.Topics[at[j]].ErrorCode, resp.Topics[at[j]].ErrorMessage = errCode(err)
			continue
		}
		kept, keptAt = append(kept, rec), append(keptAt, at[j])
	}
	recs, at = kept, keptAt
	resp.ThrottleMillis = charge.millis()
	if len(recs) > 0 {
		ctx, cancel := withTimeout(ctx, r.TimeoutMillis)
		defer cancel()
		_, errs := m.node.proposeAll(ctx, recs)
		for j, i := range at {
			err := errs[j]
			if errors.Is(err, image.ErrStale) {
				err = opErr(kerr.InvalidPartitions, "the partition count changed while the request was processed")
			}
			resp.Topics[i].ErrorCode, resp.Topics[i].ErrorMessage = errCode(err)
		}
	}
	return resp
}

// planCreatePartitions plans r's topics on the current image, appending each topic's
// answer to resp; recs are the records to propose and at their answers' positions.
// stale reports an error an image behind the controller's could cause (an unknown
// topic, too few brokers).
func (m *Module) planCreatePartitions(ctx context.Context, req *kernel.Request, r *kmsg.CreatePartitionsRequest, resp *kmsg.CreatePartitionsResponse, dups map[string]int) (recs []image.Record, at []int, stale bool) {
	im := m.node.hub.image()
	for _, t := range r.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		var err error
		topic := im.Topic(t.Topic)
		switch {
		case dups[t.Topic] > 1:
			err = opErr(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Topic)
		case !req.Allowed(ctx, kernel.OpAlter, kernel.ResTopic, t.Topic):
			err = opErr(kerr.TopicAuthorizationFailed, "")
		case topic == nil:
			err = opErr(kerr.UnknownTopicOrPartition, "")
		default:
			var assignment [][]int32
			if t.Assignment != nil {
				assignment = make([][]int32, len(t.Assignment))
				for i, a := range t.Assignment {
					assignment[i] = slices.Clone(a.Replicas)
				}
			}
			var rec *image.CreatePartitionsRecord
			if rec, err = m.planPartitions(im, topic, t.Count, assignment); err == nil && !r.ValidateOnly {
				recs = append(recs, rec)
				at = append(at, len(resp.Topics))
			}
		}
		stale = stale || brokerCountError(err) || errors.Is(err, kerr.UnknownTopicOrPartition)
		rt.ErrorCode, rt.ErrorMessage = errCode(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return recs, at, stale
}
