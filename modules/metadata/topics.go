package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Topic name rules, as Kafka's.
const (
	maxTopicNameLen = 249
	// maxPartitions bounds one topic's partition count: it keeps a bad request from
	// allocating an image of billions of partitions.
	maxPartitions = 1 << 16
)

// opError is a per-resource failure with its Kafka code and a message for the client.
type opError struct {
	code *kerr.Error
	msg  string
}

func (e *opError) Error() string {
	if e.msg == "" {
		return e.code.Message
	}
	return e.code.Message + ": " + e.msg
}

// Unwrap returns the Kafka error, so errors.Is(err, kerr.X) works on an opError.
func (e *opError) Unwrap() error { return e.code }

func opErr(code *kerr.Error, format string, args ...any) *opError {
	return &opError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errCode maps an error to a Kafka error code and message, at the response edge.
func errCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	var oe *opError
	switch {
	case errors.As(err, &oe):
		if oe.msg == "" {
			return oe.code.Code, nil
		}
		return oe.code.Code, &oe.msg
	case errors.Is(err, ErrNotController):
		return kerr.NotController.Code, nil
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, nil
	case errors.Is(err, image.ErrTopicExists):
		msg := err.Error()
		return kerr.TopicAlreadyExists.Code, &msg
	case errors.Is(err, image.ErrUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code, nil
	}
	msg := err.Error()
	return kerr.UnknownServerError.Code, &msg
}

// validateTopicName applies Kafka's rules: non-empty, at most 249 characters of
// [a-zA-Z0-9._-], not "." or "..".
func validateTopicName(name string) error {
	switch {
	case name == "":
		return opErr(kerr.InvalidTopicException, "topic name is empty")
	case name == "." || name == "..":
		return opErr(kerr.InvalidTopicException, "topic name cannot be %q", name)
	case len(name) > maxTopicNameLen:
		return opErr(kerr.InvalidTopicException, "topic name is longer than %d characters", maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return opErr(kerr.InvalidTopicException, "topic name %q contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// collidingTopic returns an existing topic whose name equals name once '.' and '_' are
// treated alike (Kafka's metric names cannot tell them apart), or "".
func collidingTopic(im *kernel.Image, name string) string {
	norm := func(s string) string { return strings.ReplaceAll(s, ".", "_") }
	if !strings.ContainsAny(name, "._") {
		return ""
	}
	n := norm(name)
	for other := range im.Topics() {
		if other != name && norm(other) == n {
			return other
		}
	}
	return ""
}

// liveBrokers returns the unfenced brokers' ids, sorted.
func liveBrokers(im *kernel.Image) []int32 {
	var ids []int32
	for id, b := range im.Brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// brokerSettings is what the controller reads from the broker configs.
func (nd *node) brokerSettings(im *kernel.Image) kconfig.Broker {
	return kconfig.ResolveBroker(nd.mergedBrokerConfigs(im))
}

// mergedBrokerConfigs merges static, dynamic default and dynamic node configs.
func (nd *node) mergedBrokerConfigs(im *kernel.Image) map[string]string {
	return kconfig.MergeBroker(nd.kctx.Broker().StaticConfigs, im.BrokerConfigs[""], im.BrokerConfigs[image.BrokerConfigKey(nd.nodeID)])
}

// place assigns replicas of count new partitions over the live brokers from a random
// start (see placeReplicas). The leader is the first replica and the ISR is every
// replica.
func (nd *node) place(im *kernel.Image, live []int32, count int, rf int) ([]image.PartitionAssignment, error) {
	start, err := nd.randIntn(len(live))
	if err != nil {
		return nil, err
	}
	racks := make(map[int32]string, len(live))
	for _, id := range live {
		racks[id] = im.Brokers[id].Rack
	}
	return placeReplicas(live, racks, start, count, rf), nil
}

// manualAssignment checks client-given replica lists: each non-empty, without
// duplicates, on registered brokers, all of the same length (rf > 0: that length).
func manualAssignment(im *kernel.Image, lists [][]int32, rf int) ([]image.PartitionAssignment, error) {
	out := make([]image.PartitionAssignment, len(lists))
	for i, replicas := range lists {
		if len(replicas) == 0 {
			return nil, opErr(kerr.InvalidReplicaAssignment, "partition %d has no replicas", i)
		}
		if rf <= 0 {
			rf = len(replicas)
		}
		if len(replicas) != rf {
			return nil, opErr(kerr.InvalidReplicaAssignment, "partition %d has %d replicas, others have %d", i, len(replicas), rf)
		}
		seen := map[int32]bool{}
		for _, b := range replicas {
			if seen[b] {
				return nil, opErr(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", i, b)
			}
			seen[b] = true
			if im.Brokers[b] == nil {
				return nil, opErr(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", i, b)
			}
		}
		out[i] = image.PartitionAssignment{Replicas: slices.Clone(replicas), Leader: replicas[0], ISR: slices.Clone(replicas)}
	}
	return out, nil
}

// topicRequest is one topic of a CreateTopics request (or an auto-creation).
type topicRequest struct {
	Name          string
	NumPartitions int32 // -1: broker default
	RF            int16 // -1: broker default
	Assignment    map[int32][]int32
	Configs       map[string]string
}

// planTopic validates a topic creation against im and returns the record to propose.
func (m *Module) planTopic(im *kernel.Image, tr topicRequest) (*image.CreateTopicRecord, error) {
	if err := validateTopicName(tr.Name); err != nil {
		return nil, err
	}
	if im.Topic(tr.Name) != nil {
		return nil, opErr(kerr.TopicAlreadyExists, "topic %q already exists", tr.Name)
	}
	if other := collidingTopic(im, tr.Name); other != "" {
		return nil, opErr(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' are interchangeable in metric names)", tr.Name, other)
	}
	merged := m.node.mergedBrokerConfigs(im)
	if err := kconfig.ValidateTopicConfigs(tr.Configs, merged); err != nil {
		return nil, opErr(kerr.InvalidConfig, "%v", err)
	}
	settings := kconfig.ResolveBroker(merged)
	var parts []image.PartitionAssignment
	if len(tr.Assignment) > 0 {
		if tr.NumPartitions != -1 || tr.RF != -1 {
			return nil, opErr(kerr.InvalidRequest, "both a replica assignment and a partition count or replication factor were given")
		}
		if len(tr.Assignment) > maxPartitions {
			return nil, opErr(kerr.InvalidPartitions, "number of partitions must be at most %d, got %d", maxPartitions, len(tr.Assignment))
		}
		lists := make([][]int32, len(tr.Assignment))
		for p, replicas := range tr.Assignment {
			if p < 0 || int(p) >= len(lists) {
				return nil, opErr(kerr.InvalidReplicaAssignment, "partitions must be numbered 0 to %d, got %d", len(lists)-1, p)
			}
			lists[p] = replicas
		}
		var err error
		if parts, err = manualAssignment(im, lists, 0); err != nil {
			return nil, err
		}
	} else {
		np, rf := tr.NumPartitions, int(tr.RF)
		if np == -1 {
			np = settings.NumPartitions
		}
		if rf == -1 {
			rf = int(settings.DefaultReplicationFactor)
		}
		if np < 1 || np > maxPartitions {
			return nil, opErr(kerr.InvalidPartitions, "number of partitions must be between 1 and %d, got %d", maxPartitions, np)
		}
		live := liveBrokers(im)
		if rf < 1 || rf > len(live) {
			return nil, opErr(kerr.InvalidReplicationFactor, "replication factor %d: must be between 1 and the number of live brokers (%d)", rf, len(live))
		}
		var err error
		if parts, err = m.node.place(im, live, int(np), rf); err != nil {
			return nil, err
		}
	}
	id, err := m.node.newUUID()
	if err != nil {
		return nil, err
	}
	return &image.CreateTopicRecord{Name: tr.Name, ID: id, Partitions: parts, Configs: maps.Clone(tr.Configs)}, nil
}

// createTopics validates and creates topics. validateOnly plans but proposes nothing.
// errs[i] is the outcome of trs[i]; the image holds every created topic.
func (m *Module) createTopics(ctx context.Context, trs []topicRequest, validateOnly bool) (*kernel.Image, []*image.CreateTopicRecord, []error) {
	im, plans, errs, recs, idx := m.planTopics(trs, validateOnly)
	// This broker's image may trail the controller's (a broker that just registered is
	// missing from it): plan again on what the controller has.
	if m.node.replanAfterCatchUp(ctx, slices.ContainsFunc(errs, brokerCountError)) {
		im, plans, errs, recs, idx = m.planTopics(trs, validateOnly)
	}
	if len(recs) == 0 {
		return im, plans, errs
	}
	im, perrs := m.node.proposeAll(ctx, recs)
	for j, err := range perrs {
		errs[idx[j]] = err
	}
	return im, plans, errs
}

// brokerCountError: a plan failed on the brokers this image lists (too few live ones
// for the replication factor, or an assignment naming one it does not know).
func brokerCountError(err error) bool {
	return errors.Is(err, kerr.InvalidReplicationFactor) || errors.Is(err, kerr.InvalidReplicaAssignment)
}

// planTopics plans trs on the current image; recs are the records to propose and idx
// their requests' positions.
func (m *Module) planTopics(trs []topicRequest, validateOnly bool) (im *kernel.Image, plans []*image.CreateTopicRecord, errs []error, recs []image.Record, idx []int) {
	im = m.node.hub.image()
	errs = make([]error, len(trs))
	plans = make([]*image.CreateTopicRecord, len(trs))
	planned := map[string]string{} // collision form ('.' as '_') → name, in this request
	for i, tr := range trs {
		plans[i], errs[i] = m.planTopic(im, tr)
		if errs[i] == nil && strings.ContainsAny(tr.Name, "._") {
			// planTopic checked the image; topics of one request must not collide
			// with each other either.
			n := strings.ReplaceAll(tr.Name, ".", "_")
			if other, ok := planned[n]; ok {
				plans[i], errs[i] = nil, opErr(kerr.InvalidTopicException, "topic %q collides with topic %q of the same request ('.' and '_' are interchangeable in metric names)", tr.Name, other)
			} else {
				planned[n] = tr.Name
			}
		}
		if errs[i] == nil && !validateOnly {
			recs = append(recs, plans[i])
			idx = append(idx, i)
		}
	}
	return im, plans, errs, recs, idx
}

// planPartitions validates growing topic t to count partitions.
func (m *Module) planPartitions(im *kernel.Image, t *kernel.TopicImage, count int32, assignment [][]int32) (*image.CreatePartitionsRecord, error) {
	cur := int32(len(t.Partitions))
	switch {
	case count < cur:
		return nil, opErr(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", cur, count)
	case count == cur:
		return nil, opErr(kerr.InvalidPartitions, "topic already has %d partitions", cur)
	case count > maxPartitions:
		return nil, opErr(kerr.InvalidPartitions, "number of partitions must be at most %d, got %d", maxPartitions, count)
	}
	add := int(count - cur)
	rf := len(t.Partitions[0].Replicas)
	var parts []image.PartitionAssignment
	var err error
	if assignment != nil {
		if len(assignment) != add {
			return nil, opErr(kerr.InvalidReplicaAssignment, "attempted to add %d partitions, but %d assignments were given", add, len(assignment))
		}
		parts, err = manualAssignment(im, assignment, rf)
	} else {
		live := liveBrokers(im)
		if rf > len(live) {
			return nil, opErr(kerr.InvalidReplicationFactor, "replication factor %d is larger than the number of live brokers (%d)", rf, len(live))
		}
		parts, err = m.node.place(im, live, add, rf)
	}
	if err != nil {
		return nil, err
	}
	return &image.CreatePartitionsRecord{Topic: t.Name, ID: t.ID, From: cur, Partitions: parts}, nil
}

// parseBrokerResource checks a BROKER config resource name: "" (cluster default) or
// this node's id. It returns the BrokerConfigs key.
func (nd *node) parseBrokerResource(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(n) != nd.nodeID {
		return "", opErr(kerr.InvalidRequest, "unexpected broker id %q: expected %d or the empty string (cluster default)", name, nd.nodeID)
	}
	return image.BrokerConfigKey(nd.nodeID), nil
}

// CreateTopic creates a topic for another module (the group and transaction
// coordinators create their internal topics with it), found by type assertion on the
// metadata module. partitions and rf of -1 take the broker defaults. It returns the
// topic once this broker's image has it; an existing topic is returned as it is, with
// no error, so concurrent creators agree.
func (m *Module) CreateTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) (*kernel.TopicImage, error) {
	if t := m.node.hub.image().Topic(name); t != nil {
		return t, nil
	}
	im, _, errs := m.createTopics(ctx, []topicRequest{{Name: name, NumPartitions: partitions, RF: rf, Configs: configs}}, false)
	if t := im.Topic(name); t != nil {
		return t, nil
	}
	if errs[0] == nil {
		errs[0] = fmt.Errorf("topic %s: %w", name, image.ErrUnknownTopic)
	}
	return nil, fmt.Errorf("create topic %s: %w", name, errs[0])
}
