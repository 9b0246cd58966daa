package image

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
	// ErrTopicExists: a topic with the name (or id) exists.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: no topic has that name and id.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrUnknownBroker: the node is not registered.
	ErrUnknownBroker = errors.New("unknown broker")
	// ErrStale: the entry was proposed against an image that has since changed.
	ErrStale = errors.New("stale proposal")
	// ErrClusterIDSet: the cluster id is already set to another value.
	ErrClusterIDSet = errors.New("cluster id already set")
	// ErrInvalidEntry: the entry is malformed (no partitions, bad partition number...).
	ErrInvalidEntry = errors.New("invalid metadata entry")
	// ErrNotLeader: a PartitionChange names a leader the partition no longer has.
	ErrNotLeader = errors.New("not the partition leader")
	// ErrFencedLeaderEpoch: a PartitionChange names an old leader epoch.
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrIneligibleReplica: a PartitionChange adds a broker to the ISR, or makes it
	// leader, that is not registered and unfenced.
	ErrIneligibleReplica = errors.New("ineligible replica")
)

// State is what the log has built: the published image plus what the image does not
// show. It is immutable once published; apply returns a new state sharing what it did
// not change.
type State struct {
	Image *kernel.Image
	// Regs are broker registrations, by node id.
	Regs map[int32]BrokerReg
	// NextProducerID is the first producer id not yet allocated (ProducerIDs entries);
	// it starts at 0 and only grows.
	NextProducerID int64

	// owned, while a batch applies (applyBatch), holds the topics this batch copied:
	// no published state has seen them, so the batch's later partition changes write
	// into their partition slices instead of copying them again (one copy per topic
	// per batch, not per record: an election round moving 30,000 leaders of one
	// topic). Nil outside a batch: a published state is never written.
	owned map[*kernel.TopicImage]struct{}
}

// BrokerReg is what a broker registration carries beyond kernel.BrokerImage.
type BrokerReg struct {
	Incarnation UUID
	Epoch       uint64 // index of the registering entry
}

func EmptyState() *State {
	return &State{
		Image: &kernel.Image{
			ControllerID:  -1,
			Brokers:       map[int32]*kernel.BrokerImage{},
			BrokerConfigs: map[string]map[string]string{},
			Extensions:    map[string]map[string][]byte{},
		},
		Regs: map[int32]BrokerReg{},
	}
}

// ApplyResult is what FSM.Apply returns for a command entry (ApplyEntry's result).
type ApplyResult struct {
	Index uint64
	Err   error
	// FirstProducerID is the first id of the block an accepted ProducerIDs entry got
	// (0 for other entries). The proposer reads it from its own future's response.
	FirstProducerID int64
	// Batch holds, for a BatchRecord entry, each of its records' results in order (Err
	// is then nil: a batch is never rejected as a whole, only record by record).
	Batch []ApplyResult
}

// ApplyEntry decodes the command entry data at index and applies it; it is the whole
// of the raft FSM's Apply but for publishing. rec is nil when the entry does not decode
// (res.Err wraps ErrUnknownRecord or ErrBadRecord): next then equals s but for its
// Version. Otherwise res.Err is nil or the reason Apply rejected rec, and for an
// accepted ProducerIDsRecord res.FirstProducerID is the first id of its block; for a
// BatchRecord, res.Batch has those of each of its records.
func (s *State) ApplyEntry(index uint64, data []byte) (next *State, rec Record, res ApplyResult) {
	rec, err := DecodeRecord(data)
	if err != nil {
		next, _ = s.Apply(index, nil)
		return next, nil, ApplyResult{Index: index, Err: err}
	}
	if b, ok := rec.(*BatchRecord); ok {
		next, res.Batch = s.applyBatch(index, b)
		res.Index = index
		return next, rec, res
	}
	next, res = s.applyOne(index, rec)
	return next, rec, res
}

// applyOne applies one record that is not a batch and says what it did.
func (s *State) applyOne(index uint64, rec Record) (*State, ApplyResult) {
	next, err := s.Apply(index, rec)
	res := ApplyResult{Index: index, Err: err}
	if _, ok := rec.(*ProducerIDsRecord); ok && err == nil {
		// The block starts where the counter stood before this entry. Entries (and a
		// batch's records) apply one at a time, so this is the proposer's block and
		// nobody else's.
		res.FirstProducerID = s.NextProducerID
	}
	return next, res
}

// applyBatch applies a batch's records in order, each to the state the one before it
// left, all at index; the result is one state (one image), and each record's outcome.
func (s *State) applyBatch(index uint64, b *BatchRecord) (*State, []ApplyResult) {
	results := make([]ApplyResult, len(b.Records))
	cur := s.successor(index)
	cur.owned = map[*kernel.TopicImage]struct{}{}
	defer func() { cur.owned = nil }()
	for i, rec := range b.Records {
		if _, nested := rec.(*BatchRecord); nested { // decodeBatch refuses these too
			results[i] = ApplyResult{Index: index, Err: fmt.Errorf("nested batch: %w", ErrInvalidEntry)}
			continue
		}
		cur, results[i] = cur.applyOne(index, rec)
	}
	return cur, results
}

// Apply returns the state after the entry at index. It never mutates s, reads no clock
// and no randomness: every broker computes the same state from the same log. A rejected
// entry still yields a new state (same contents, Version = index).
func (s *State) Apply(index uint64, r Record) (*State, error) {
	next := s.successor(index)
	var err error
	switch r := r.(type) {
	case *ClusterIDRecord:
		err = next.setClusterID(r)
	case *LeaderChangeRecord:
		next.Image.ControllerID = r.NodeID
	case *RegisterBrokerRecord:
		next.registerBroker(index, r)
	case *FenceBrokerRecord:
		err = next.setFenced(r.NodeID, r.Epoch, true)
	case *UnfenceBrokerRecord:
		err = next.setFenced(r.NodeID, r.Epoch, false)
	case *CreateTopicRecord:
		err = next.createTopic(r)
	case *DeleteTopicRecord:
		err = next.deleteTopic(r)
	case *CreatePartitionsRecord:
		err = next.createPartitions(r)
	case *AlterTopicConfigsRecord:
		err = next.alterTopicConfigs(r)
	case *AlterBrokerConfigsRecord:
		next.Image.BrokerConfigs = maps.Clone(next.Image.BrokerConfigs)
		m := r.ConfigChange.ApplyTo(next.Image.BrokerConfigs[r.Node])
		if len(m) == 0 {
			delete(next.Image.BrokerConfigs, r.Node)
		} else {
			next.Image.BrokerConfigs[r.Node] = m
		}
	case *PartitionChangeRecord:
		err = next.partitionChange(r)
	case *ExtensionRecord:
		err = next.putExtension(r)
	case *ProducerIDsRecord:
		err = next.allocateProducerIDs(r)
	case *FeatureLevelRecord:
		err = next.setFeatureLevel(r)
	case *UnregisterBrokerRecord:
		err = next.unregisterBroker(r)
	case *BatchRecord:
		var results []ApplyResult
		next, results = s.applyBatch(index, r)
		errs := make([]error, len(results))
		for i := range results {
			errs[i] = results[i].Err
		}
		return next, errors.Join(errs...)
	default:
		err = fmt.Errorf("%T: %w", r, ErrInvalidEntry)
	}
	if err != nil { // a rejected entry changes nothing but the version
		next = s.successor(index)
	}
	return next, err
}

// successor returns a copy of s at version index that shares everything with s; apply
// then copies what it changes.
func (s *State) successor(index uint64) *State {
	next := &State{Image: new(kernel.Image), Regs: s.Regs, NextProducerID: s.NextProducerID, owned: s.owned}
	*next.Image = *s.Image
	next.Image.Version = index
	return next
}

func (s *State) setClusterID(r *ClusterIDRecord) error {
	switch {
	case r.ClusterID == "":
		return fmt.Errorf("empty cluster id: %w", ErrInvalidEntry)
	case s.Image.ClusterID == "":
		s.Image.ClusterID = r.ClusterID
	case s.Image.ClusterID != r.ClusterID:
		return fmt.Errorf("%w to %s", ErrClusterIDSet, s.Image.ClusterID)
	}
	return nil
}

func (s *State) registerBroker(index uint64, r *RegisterBrokerRecord) {
	b := &kernel.BrokerImage{ID: r.NodeID, Rack: r.Rack, Fenced: r.Fenced, Features: maps.Clone(r.Features)}
	for _, e := range r.Endpoints {
		b.Endpoints = append(b.Endpoints, kernel.ListenerInfo{Name: e.Name, Host: e.Host, Port: e.Port})
	}
	s.Image.Brokers = maps.Clone(s.Image.Brokers)
	s.Image.Brokers[r.NodeID] = b
	s.Regs = maps.Clone(s.Regs)
	s.Regs[r.NodeID] = BrokerReg{Incarnation: r.Incarnation, Epoch: index}
}

func (s *State) setFenced(node int32, epoch uint64, fenced bool) error {
	b, ok := s.Image.Brokers[node]
	if !ok {
		return fmt.Errorf("node %d: %w", node, ErrUnknownBroker)
	}
	if epoch != 0 && s.Regs[node].Epoch != epoch {
		return fmt.Errorf("node %d epoch %d: %w", node, epoch, ErrStale)
	}
	nb := *b
	nb.Fenced = fenced
	s.Image.Brokers = maps.Clone(s.Image.Brokers)
	s.Image.Brokers[node] = &nb
	return nil
}

// validAssignments checks partition assignments of an entry.
func validAssignments(ps []PartitionAssignment) error {
	for i, p := range ps {
		if len(p.Replicas) == 0 {
			return fmt.Errorf("partition %d has no replicas: %w", i, ErrInvalidEntry)
		}
	}
	return nil
}

func newPartitions(from int32, ps []PartitionAssignment) []kernel.PartitionImage {
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

// IsInternalTopic reports whether Kafka treats the topic as internal.
func IsInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

func (s *State) putTopic(t *kernel.TopicImage) { s.Image.PutTopic(t) }

func (s *State) createTopic(r *CreateTopicRecord) error {
	if s.Image.Topic(r.Name) != nil {
		return fmt.Errorf("%s: %w", r.Name, ErrTopicExists)
	}
	if s.Image.TopicByID(r.ID) != nil || r.ID == (UUID{}) {
		return fmt.Errorf("%s: id %s: %w", r.Name, r.ID, ErrTopicExists)
	}
	if r.Name == "" || len(r.Partitions) == 0 {
		return fmt.Errorf("topic %q with %d partitions: %w", r.Name, len(r.Partitions), ErrInvalidEntry)
	}
	if err := validAssignments(r.Partitions); err != nil {
		return err
	}
	s.putTopic(&kernel.TopicImage{
		Name:       r.Name,
		ID:         r.ID,
		Internal:   IsInternalTopic(r.Name),
		Partitions: newPartitions(0, r.Partitions),
		Configs:    maps.Clone(r.Configs),
	})
	return nil
}

// topic returns the topic named name with id id.
func (s *State) topic(name string, id UUID) (*kernel.TopicImage, error) {
	t := s.Image.Topic(name)
	if t == nil || t.ID != id {
		return nil, fmt.Errorf("%s (%s): %w", name, id, ErrUnknownTopic)
	}
	return t, nil
}

func (s *State) deleteTopic(r *DeleteTopicRecord) error {
	if _, err := s.topic(r.Name, r.ID); err != nil {
		return err
	}
	s.Image.RemoveTopic(r.Name)
	return nil
}

func (s *State) createPartitions(r *CreatePartitionsRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	if int32(len(t.Partitions)) != r.From {
		return fmt.Errorf("%s has %d partitions, entry expects %d: %w", r.Topic, len(t.Partitions), r.From, ErrStale)
	}
	if len(r.Partitions) == 0 {
		return fmt.Errorf("%s: no partitions to add: %w", r.Topic, ErrInvalidEntry)
	}
	if err := validAssignments(r.Partitions); err != nil {
		return err
	}
	nt := *t
	nt.Partitions = append(slices.Clip(t.Partitions), newPartitions(r.From, r.Partitions)...)
	s.putTopic(&nt)
	return nil
}

func (s *State) alterTopicConfigs(r *AlterTopicConfigsRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	nt := *t
	nt.Configs = r.ConfigChange.ApplyTo(t.Configs)
	s.putTopic(&nt)
	return nil
}

func (s *State) partitionChange(r *PartitionChangeRecord) error {
	t, err := s.topic(r.Topic, r.ID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%s partition %d: %w", r.Topic, r.Partition, ErrInvalidEntry)
	}
	old := t.Partitions[r.Partition]
	// The checks, in the order AlterPartition reports them: leader, leader epoch,
	// partition epoch.
	if r.ExpectLeader != nil && *r.ExpectLeader != old.Leader {
		return fmt.Errorf("%s-%d leader is %d, entry expects %d: %w", r.Topic, r.Partition, old.Leader, *r.ExpectLeader, ErrNotLeader)
	}
	if r.ExpectLeaderEpoch != nil && *r.ExpectLeaderEpoch != old.LeaderEpoch {
		return fmt.Errorf("%s-%d leader epoch %d, entry expects %d: %w", r.Topic, r.Partition, old.LeaderEpoch, *r.ExpectLeaderEpoch, ErrFencedLeaderEpoch)
	}
	if r.PartitionEpoch >= 0 && r.PartitionEpoch != old.PartitionEpoch {
		return fmt.Errorf("%s-%d partition epoch %d, entry expects %d: %w", r.Topic, r.Partition, old.PartitionEpoch, r.PartitionEpoch, ErrStale)
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
	if _, ok := s.owned[t]; ok {
		// This batch's own copy (see State.owned): nothing published shares it, and
		// every check above has passed, so a write here cannot leak into a rejection.
		t.Partitions[r.Partition] = p
		return nil
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	nt.Partitions[r.Partition] = p
	s.putTopic(&nt)
	if s.owned != nil {
		s.owned[&nt] = struct{}{}
	}
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
func (s *State) checkPartition(old, p *kernel.PartitionImage) error {
	live := func(id int32) bool { b := s.Image.Brokers[id]; return b != nil && !b.Fenced }
	if len(p.Replicas) == 0 || HasDuplicates(p.Replicas) {
		return fmt.Errorf("replicas %v: %w", p.Replicas, ErrInvalidEntry)
	}
	for _, r := range p.Replicas {
		if s.Image.Brokers[r] == nil && !slices.Contains(old.Replicas, r) {
			return fmt.Errorf("replica %d: %w", r, ErrUnknownBroker)
		}
	}
	if len(p.ISR) == 0 || HasDuplicates(p.ISR) || !Subset(p.ISR, p.Replicas) {
		return fmt.Errorf("ISR %v of replicas %v: %w", p.ISR, p.Replicas, ErrInvalidEntry)
	}
	if p.Leader != -1 && !slices.Contains(p.ISR, p.Leader) {
		return fmt.Errorf("leader %d not in ISR %v: %w", p.Leader, p.ISR, ErrInvalidEntry)
	}
	for _, r := range p.ISR {
		if !slices.Contains(old.ISR, r) && !live(r) {
			return fmt.Errorf("broker %d joins the ISR but is not a live broker: %w", r, ErrIneligibleReplica)
		}
	}
	if p.Leader != old.Leader && p.Leader != -1 && !live(p.Leader) {
		return fmt.Errorf("new leader %d is not a live broker: %w", p.Leader, ErrIneligibleReplica)
	}
	if HasDuplicates(p.AddingReplicas) || HasDuplicates(p.RemovingReplicas) ||
		!Subset(p.AddingReplicas, p.Replicas) || !Subset(p.RemovingReplicas, p.Replicas) ||
		slices.ContainsFunc(p.AddingReplicas, func(r int32) bool { return slices.Contains(p.RemovingReplicas, r) }) {
		return fmt.Errorf("adding %v, removing %v of replicas %v: %w", p.AddingReplicas, p.RemovingReplicas, p.Replicas, ErrInvalidEntry)
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
	return len(a) == len(b) && Subset(a, b) && Subset(b, a) && !HasDuplicates(a) && !HasDuplicates(b)
}

// Subset reports whether every id of a is in b.
func Subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func HasDuplicates(ids []int32) bool {
	for i, x := range ids {
		if slices.Contains(ids[i+1:], x) {
			return true
		}
	}
	return false
}

// ApplyTo returns a new map: m edited by c. It never modifies m.
func (c *ConfigChange) ApplyTo(m map[string]string) map[string]string {
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

// BrokerConfigKey is the BrokerConfigs key of a node.
func BrokerConfigKey(node int32) string { return strconv.FormatInt(int64(node), 10) }
