package metadata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/kernel"
)

// Reasons an applied entry changes nothing. Apply returns them to the proposer (raft's
// ApplyFuture.Response); every broker reaches the same verdict because it is a pure
// function of the image and the entry.
var (
	// errTopicExists: a topic with the name (or id) exists.
	errTopicExists = errors.New("topic already exists")
	// errUnknownTopic: no topic has that name and id.
	errUnknownTopic = errors.New("unknown topic")
	// errUnknownBroker: the node is not registered.
	errUnknownBroker = errors.New("unknown broker")
	// errStale: the entry was proposed against an image that has since changed.
	errStale = errors.New("stale proposal")
	// errClusterIDSet: the cluster id is already set to another value.
	errClusterIDSet = errors.New("cluster id already set")
	// errInvalidEntry: the entry is malformed (no partitions, bad partition number...).
	errInvalidEntry = errors.New("invalid metadata entry")
	// errNotLeader: a PartitionChange names a leader the partition no longer has.
	errNotLeader = errors.New("not the partition leader")
	// errFencedLeaderEpoch: a PartitionChange names an old leader epoch.
	errFencedLeaderEpoch = errors.New("fenced leader epoch")
	// errIneligibleReplica: a PartitionChange adds a broker to the ISR, or makes it
	// leader, that is not registered and unfenced.
	errIneligibleReplica = errors.New("ineligible replica")
)

// state is what the log has built: the published image plus what the image does not
// show. It is immutable once published; apply returns a new state sharing what it did
// not change.
type state struct {
	img *kernel.Image
	// regs are broker registrations, by node id.
	regs map[int32]brokerReg
	// nextProducerID is the first producer id not yet allocated (ProducerIDs entries);
	// it starts at 0 and only grows.
	nextProducerID int64
}

// brokerReg is what a broker registration carries beyond kernel.BrokerImage.
type brokerReg struct {
	Incarnation uuid
	Epoch       uint64 // index of the registering entry
}

func emptyState() *state {
	return &state{
		img: &kernel.Image{
			ControllerID:  -1,
			Brokers:       map[int32]*kernel.BrokerImage{},
			Topics:        map[string]*kernel.TopicImage{},
			TopicsByID:    map[[16]byte]*kernel.TopicImage{},
			BrokerConfigs: map[string]map[string]string{},
			Extensions:    map[string]map[string][]byte{},
		},
		regs: map[int32]brokerReg{},
	}
}

// applyResult is what FSM.Apply returns for a command entry.
type applyResult struct {
	Index uint64
	Err   error
	// FirstProducerID is the first id of the block an accepted ProducerIDs entry got
	// (0 for other entries). The proposer reads it from its own future's response.
	FirstProducerID int64
}

// apply returns the state after the entry at index. It never mutates s, reads no clock
// and no randomness: every broker computes the same state from the same log. A rejected
// entry still yields a new state (same contents, Version = index).
func (s *state) apply(index uint64, r record) (*state, error) {
	next := s.successor(index)
	var err error
	switch r := r.(type) {
	case *clusterIDRecord:
		err = next.setClusterID(r)
	case *leaderChangeRecord:
		next.img.ControllerID = r.NodeID
	case *registerBrokerRecord:
		next.registerBroker(index, r)
	case *fenceBrokerRecord:
		err = next.setFenced(r.NodeID, r.Epoch, true)
	case *unfenceBrokerRecord:
		err = next.setFenced(r.NodeID, r.Epoch, false)
	case *createTopicRecord:
		err = next.createTopic(r)
	case *deleteTopicRecord:
		err = next.deleteTopic(r)
	case *createPartitionsRecord:
		err = next.createPartitions(r)
	case *alterTopicConfigsRecord:
		err = next.alterTopicConfigs(r)
	case *alterBrokerConfigsRecord:
		next.img.BrokerConfigs = maps.Clone(next.img.BrokerConfigs)
		m := r.configChange.applyTo(next.img.BrokerConfigs[r.Node])
		if len(m) == 0 {
			delete(next.img.BrokerConfigs, r.Node)
		} else {
			next.img.BrokerConfigs[r.Node] = m
		}
	case *partitionChangeRecord:
		err = next.partitionChange(r)
	case *extensionRecord:
		err = next.putExtension(r)
	case *producerIDsRecord:
		err = next.allocateProducerIDs(r)
	default:
		err = fmt.Errorf("%T: %w", r, errInvalidEntry)
	}
	if err != nil { // a rejected entry changes nothing but the version
		next = s.successor(index)
	}
	return next, err
}

// successor returns a copy of s at version index that shares everything with s; apply
// then copies what it changes.
func (s *state) successor(index uint64) *state {
	next := &state{img: new(kernel.Image), regs: s.regs, nextProducerID: s.nextProducerID}
	*next.img = *s.img
	next.img.Version = index
	return next
}

func (s *state) setClusterID(r *clusterIDRecord) error {
	switch {
	case r.ClusterID == "":
		return fmt.Errorf("empty cluster id: %w", errInvalidEntry)
	case s.img.ClusterID == "":
		s.img.ClusterID = r.ClusterID
	case s.img.ClusterID != r.ClusterID:
		return fmt.Errorf("%w to %s", errClusterIDSet, s.img.ClusterID)
	}
	return nil
}

func (s *state) registerBroker(index uint64, r *registerBrokerRecord) {
	b := &kernel.BrokerImage{ID: r.NodeID, Rack: r.Rack, Fenced: r.Fenced}
	for _, e := range r.Endpoints {
		b.Endpoints = append(b.Endpoints, kernel.ListenerInfo{Name: e.Name, Host: e.Host, Port: e.Port})
	}
	s.img.Brokers = maps.Clone(s.img.Brokers)
	s.img.Brokers[r.NodeID] = b
	s.regs = maps.Clone(s.regs)
	s.regs[r.NodeID] = brokerReg{Incarnation: r.Incarnation, Epoch: index}
}

func (s *state) setFenced(node int32, epoch uint64, fenced bool) error {
	b, ok := s.img.Brokers[node]
	if !ok {
		return fmt.Errorf("node %d: %w", node, errUnknownBroker)
	}
	if epoch != 0 && s.regs[node].Epoch != epoch {
		return fmt.Errorf("node %d epoch %d: %w", node, epoch, errStale)
	}
	nb := *b
	nb.Fenced = fenced
	s.img.Brokers = maps.Clone(s.img.Brokers)
	s.img.Brokers[node] = &nb
	return nil
}

// validAssignments checks partition assignments of an entry.
func validAssignments(ps []partitionAssignment) error {
	for i, p := range ps {
		if len(p.Replicas) == 0 {
			return fmt.Errorf("partition %d has no replicas: %w", i, errInvalidEntry)
		}
	}
	return nil
}

func newPartitions(from int32, ps []partitionAssignment) []kernel.PartitionImage {
	out := make([]kernel.PartitionImage, len(ps))
	for i, p := range ps {
		out[i] = kernel.PartitionImage{
			Partition: from + int32(i),
			Leader:    p.Leader,
			Replicas:  slices.Clone(p.Replicas),
			ISR:       slices.Clone(p.ISR),
		}
	}
	return out
}

// isInternalTopic reports whether Kafka treats the topic as internal.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

func (s *state) putTopic(t *kernel.TopicImage) {
	s.img.Topics = maps.Clone(s.img.Topics)
	s.img.TopicsByID = maps.Clone(s.img.TopicsByID)
	s.img.Topics[t.Name] = t
	s.img.TopicsByID[t.ID] = t
}

func (s *state) createTopic(r *createTopicRecord) error {
	if _, ok := s.img.Topics[r.Name]; ok {
		return fmt.Errorf("%s: %w", r.Name, errTopicExists)
	}
	if _, ok := s.img.TopicsByID[r.ID]; ok || r.ID == (uuid{}) {
		return fmt.Errorf("%s: id %s: %w", r.Name, r.ID, errTopicExists)
	}
	if r.Name == "" || len(r.Partitions) == 0 {
		return fmt.Errorf("topic %q with %d partitions: %w", r.Name, len(r.Partitions), errInvalidEntry)
	}
	if err := validAssignments(r.Partitions); err != nil {
		return err
	}
	s.putTopic(&kernel.TopicImage{
		Name:       r.Name,
		ID:         r.ID,
		Internal:   isInternalTopic(r.Name),
		Partitions: newPartitions(0, r.Partitions),
		Configs:    maps.Clone(r.Configs),
	})
	return nil
}

// topic returns the topic named name with id id.
func (s *state) topic(name string, id uuid) (*kernel.TopicImage, error) {
	t, ok := s.img.Topics[name]
	if !ok || t.ID != id {
		return nil, fmt.Errorf("%s (%s): %w", name, id, errUnknownTopic)
	}
	return t, nil
}

func (s *state) deleteTopic(r *deleteTopicRecord) error {
	if _, err := s.topic(r.Name, r.ID); err != nil {
		return err
	}
	s.img.Topics = maps.Clone(s.img.Topics)
	s.img.TopicsByID = maps.Clone(s.img.TopicsByID)
	delete(s.img.Topics, r.Name)
	delete(s.img.TopicsByID, r.ID)
	return nil
}

func (s *state) createPartitions(r *createPartitionsRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	if int32(len(t.Partitions)) != r.From {
		return fmt.Errorf("%s has %d partitions, entry expects %d: %w", r.Topic, len(t.Partitions), r.From, errStale)
	}
	if len(r.Partitions) == 0 {
		return fmt.Errorf("%s: no partitions to add: %w", r.Topic, errInvalidEntry)
	}
	if err := validAssignments(r.Partitions); err != nil {
		return err
	}
	nt := *t
	nt.Partitions = append(slices.Clip(t.Partitions), newPartitions(r.From, r.Partitions)...)
	s.putTopic(&nt)
	return nil
}

func (s *state) alterTopicConfigs(r *alterTopicConfigsRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	nt := *t
	nt.Configs = r.configChange.applyTo(t.Configs)
	s.putTopic(&nt)
	return nil
}

func (s *state) partitionChange(r *partitionChangeRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%s partition %d: %w", r.Topic, r.Partition, errInvalidEntry)
	}
	old := t.Partitions[r.Partition]
	// The checks, in the order AlterPartition reports them: leader, leader epoch,
	// partition epoch.
	if r.ExpectLeader != nil && *r.ExpectLeader != old.Leader {
		return fmt.Errorf("%s-%d leader is %d, entry expects %d: %w", r.Topic, r.Partition, old.Leader, *r.ExpectLeader, errNotLeader)
	}
	if r.ExpectLeaderEpoch != nil && *r.ExpectLeaderEpoch != old.LeaderEpoch {
		return fmt.Errorf("%s-%d leader epoch %d, entry expects %d: %w", r.Topic, r.Partition, old.LeaderEpoch, *r.ExpectLeaderEpoch, errFencedLeaderEpoch)
	}
	if r.PartitionEpoch >= 0 && r.PartitionEpoch != old.PartitionEpoch {
		return fmt.Errorf("%s-%d partition epoch %d, entry expects %d: %w", r.Topic, r.Partition, old.PartitionEpoch, r.PartitionEpoch, errStale)
	}
	p := old
	if r.Leader != nil && *r.Leader != p.Leader {
		p.Leader = *r.Leader
		p.LeaderEpoch++
	}
	if r.ISR != nil && !(r.Validate && sameMembers(r.ISR, p.ISR)) {
		p.ISR = slices.Clone(r.ISR)
	}
	if r.Replicas != nil {
		p.Replicas = slices.Clone(r.Replicas)
	}
	if r.Reassignment != nil {
		p.AddingReplicas, p.RemovingReplicas = nil, nil
		// nil, never empty, when there is none: images compare alike however the entry
		// was encoded.
		if len(r.Reassignment.Adding) > 0 {
			p.AddingReplicas = slices.Clone(r.Reassignment.Adding)
		}
		if len(r.Reassignment.Removing) > 0 {
			p.RemovingReplicas = slices.Clone(r.Reassignment.Removing)
		}
	}
	if r.Validate {
		if err := s.checkPartition(&old, &p); err != nil {
			return fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err)
		}
		if partitionEqual(&old, &p) {
			return nil // accepted, nothing to change: no new partition epoch
		}
	}
	p.PartitionEpoch++
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	nt.Partitions[r.Partition] = p
	s.putTopic(&nt)
	return nil
}

// checkPartition checks the partition a validated PartitionChange leaves (p, changed
// from old): the invariants every partition keeps, and that the brokers it brings in
// may come in. It reads only the image, so every broker reaches the same verdict.
//
//   - Replicas are non-empty and distinct; a replica it adds is registered
//     (errUnknownBroker).
//   - The ISR is non-empty, distinct, and a subset of the replicas.
//   - The leader is -1 or an ISR member.
//   - A broker it adds to the ISR, and a new leader, are registered and unfenced
//     (errIneligibleReplica).
//   - Adding and removing replicas are distinct replicas, none both.
//
// Shape problems are errInvalidEntry.
func (s *state) checkPartition(old, p *kernel.PartitionImage) error {
	live := func(id int32) bool { b := s.img.Brokers[id]; return b != nil && !b.Fenced }
	if len(p.Replicas) == 0 || hasDuplicates(p.Replicas) {
		return fmt.Errorf("replicas %v: %w", p.Replicas, errInvalidEntry)
	}
	for _, r := range p.Replicas {
		if s.img.Brokers[r] == nil && !slices.Contains(old.Replicas, r) {
			return fmt.Errorf("replica %d: %w", r, errUnknownBroker)
		}
	}
	if len(p.ISR) == 0 || hasDuplicates(p.ISR) || !subset(p.ISR, p.Replicas) {
		return fmt.Errorf("ISR %v of replicas %v: %w", p.ISR, p.Replicas, errInvalidEntry)
	}
	if p.Leader != -1 && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("leader %d not in ISR %v: %w", p.Leader, p.ISR, errInvalidEntry)
	}
	for _, r := range p.ISR {
		if !slices.Contains(old.ISR, r) && !live(r) {
			return fmt.Errorf("broker %d joins the ISR but is not a live broker: %w", r, errIneligibleReplica)
		}
	}
	if p.Leader != old.Leader && p.Leader != -1 && !live(p.Leader) {
		return fmt.Errorf("new leader %d is not a live broker: %w", p.Leader, errIneligibleReplica)
	}
	if hasDuplicates(p.AddingReplicas) || hasDuplicates(p.RemovingReplicas) ||
		!subset(p.AddingReplicas, p.Replicas) || !subset(p.RemovingReplicas, p.Replicas) ||
		slices.ContainsFunc(p.AddingReplicas, func(r int32) bool { return slices.Contains(p.RemovingReplicas, r) }) {
		return fmt.Errorf("adding %v, removing %v of replicas %v: %w", p.AddingReplicas, p.RemovingReplicas, p.Replicas, errInvalidEntry)
	}
	return nil
}

// partitionEqual reports whether two partition states are the same (ISR as a set).
func partitionEqual(a, b *kernel.PartitionImage) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && sameMembers(a.ISR, b.ISR) &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.AddingReplicas, b.AddingReplicas) &&
		slices.Equal(a.RemovingReplicas, b.RemovingReplicas)
}

// sameMembers reports whether a and b hold the same ids in any order, each as often.
func sameMembers(a, b []int32) bool {
	return len(a) == len(b) && subset(a, b) && subset(b, a) && !hasDuplicates(a) && !hasDuplicates(b)
}

// subset reports whether every id of a is in b.
func subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func hasDuplicates(ids []int32) bool {
	for i, x := range ids {
		if slices.Contains(ids[i+1:], x) {
			return true
		}
	}
	return false
}

// applyTo returns a new map: m edited by c. It never modifies m.
func (c *configChange) applyTo(m map[string]string) map[string]string {
	var out map[string]string
	if c.Replace {
		out = maps.Clone(c.Set)
	} else {
		out = maps.Clone(m)
		if out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, c.Set)
		for _, k := range c.Delete {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// brokerConfigKey is the BrokerConfigs key of a node.
func brokerConfigKey(node int32) string { return strconv.FormatInt(int64(node), 10) }
