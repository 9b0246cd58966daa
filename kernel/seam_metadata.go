package kernel

import (
	"context"
	"iter"

	"github.com/sluicehq/sluice/kernel/pmap"
)

// Metadata is the role interface of the metadata module: it owns the cluster metadata log
// and publishes immutable images of it.
type Metadata interface {
	// Image returns the current image. Never nil after Start. Callers must not modify it.
	Image() *Image
	// Subscribe calls fn from one goroutine with the current image (or a newer one) and
	// then with the latest image each time it changes: images published while fn runs are coalesced
	// into the newest, so fn sees versions in increasing order (never an older image
	// after a newer one) but not necessarily every version. Use DiffTopics(prev, im) for
	// what changed since the image fn saw last. The returned func unsubscribes (and
	// waits for a running fn).
	Subscribe(fn func(*Image)) (cancel func())
	// Readier: Ready reports whether the metadata log has a leader and this broker is
	// registered.
	Readier
}

// Image is an immutable, versioned view of cluster metadata: the result of applying the
// metadata log up to Version. Modules read it without locks; a change publishes a new
// image (copy on write), so a pointer to an image stays valid and unchanged.
//
// Invariant: once an image is published (returned by Metadata.Image or passed to a
// subscriber) neither it nor anything it points to (topics, partitions, maps, slices)
// is modified again. The applier builds the next image from a shallow copy and
// replaces, never edits, what changes: a changed topic is a new *TopicImage, an
// unchanged one is the same pointer in both images. Topics are held in persistent
// maps (kernel/pmap), so a change costs O(log n) however many topics there are, and
// DiffTopics finds what changed between two images by skipping what they share.
type Image struct {
	Version      uint64 // index of the last applied metadata log entry
	ClusterID    string
	ControllerID int32 // -1 when unknown
	Brokers      map[int32]*BrokerImage
	topics       pmap.Map[string, *TopicImage]
	topicsByID   pmap.Map[[16]byte, *TopicImage]
	// BrokerConfigs are dynamic broker configs: key "" is the cluster-wide default,
	// otherwise the node id in decimal.
	BrokerConfigs map[string]map[string]string
	// Extensions are modules' own records (see ExtensionStore): namespace -> key ->
	// value. Copy on write like the rest of the image.
	Extensions map[string]map[string][]byte
	// Features are the cluster's finalized feature levels (seam_features.go), every
	// one above 0; nil before the cluster finalized any.
	Features map[string]int16
}

// Feature is the finalized level of feature name, 0 when it is not finalized (off).
func (im *Image) Feature(name string) int16 {
	if im == nil {
		return 0
	}
	return im.Features[name]
}

// BrokerImage is a registered broker.
type BrokerImage struct {
	ID        int32
	Rack      string
	Endpoints []ListenerInfo
	Fenced    bool
	// Features are the feature levels the broker supports, [min, max] by name, as it
	// registered them; nil for a broker that registered without (older code).
	Features map[string][2]int16
}

// TopicImage is a topic and its partitions.
type TopicImage struct {
	Name       string
	ID         [16]byte
	Internal   bool
	Partitions []PartitionImage  // index == partition id
	Configs    map[string]string // topic-level overrides only
}

// PartitionImage is one partition's placement.
type PartitionImage struct {
	Partition      int32
	Leader         int32 // -1 when offline
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// AddingReplicas and RemovingReplicas describe a reassignment in progress (both
	// nil otherwise): Replicas is then the union of the old and the target replicas,
	// the target is Replicas minus RemovingReplicas, and the reassignment completes
	// (Kafka's rule) when the ISR without the removing replicas holds every target
	// replica.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Topic returns the topic by name, or nil.
func (im *Image) Topic(name string) *TopicImage {
	if im == nil {
		return nil
	}
	t, _ := im.topics.Get(name)
	return t
}

// TopicByID returns the topic by id, or nil.
func (im *Image) TopicByID(id [16]byte) *TopicImage {
	if im == nil {
		return nil
	}
	t, _ := im.topicsByID.Get(id)
	return t
}

// NumTopics returns the number of topics.
func (im *Image) NumTopics() int {
	if im == nil {
		return 0
	}
	return im.topics.Len()
}

// Topics yields every topic by name, in no particular order.
func (im *Image) Topics() iter.Seq2[string, *TopicImage] {
	return func(yield func(string, *TopicImage) bool) {
		if im == nil {
			return
		}
		for name, t := range im.topics.All() {
			if !yield(name, t) {
				return
			}
		}
	}
}

// TopicNames yields every topic name, in no particular order
// (slices.Sorted(im.TopicNames()) for a sorted list).
func (im *Image) TopicNames() iter.Seq[string] {
	return func(yield func(string) bool) {
		for name := range im.Topics() {
			if !yield(name) {
				return
			}
		}
	}
}

// PutTopic adds or replaces t (by name; a replaced topic's id no longer resolves).
// Only for an image being built, never one already published (see Image): it edits im
// in place, sharing nothing it changes with the image im was copied from.
func (im *Image) PutTopic(t *TopicImage) {
	if old, ok := im.topics.Get(t.Name); ok && old.ID != t.ID {
		im.topicsByID = im.topicsByID.Delete(old.ID)
	}
	im.topics = im.topics.Set(t.Name, t)
	im.topicsByID = im.topicsByID.Set(t.ID, t)
}

// RemoveTopic removes the topic named name (and its id). Like PutTopic, only for an
// image being built.
func (im *Image) RemoveTopic(name string) {
	if old, ok := im.topics.Get(name); ok {
		im.topicsByID = im.topicsByID.Delete(old.ID)
		im.topics = im.topics.Delete(name)
	}
}

// DiffTopics calls fn for every topic name whose topic differs between old and new
// (by pointer: the applier replaces a topic it changes): before is nil for a topic
// new created, after nil for one deleted; a name deleted and created again has both,
// with different IDs. old may be nil (every topic of new is reported). For images of
// one metadata log the cost is proportional to the topics changed between them, not
// to the number of topics.
func DiffTopics(old, new *Image, fn func(before, after *TopicImage)) {
	var a, b pmap.Map[string, *TopicImage]
	if old != nil {
		a = old.topics
	}
	if new != nil {
		b = new.topics
	}
	pmap.Diff(a, b, func(_ string, before, after *TopicImage, _, _ bool) { fn(before, after) })
}

// Partition returns a partition of a topic, or nil.
func (im *Image) Partition(topic string, p int32) *PartitionImage {
	t := im.Topic(topic)
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return &t.Partitions[p]
}

// TopicCreator is an optional interface of the metadata module (found by type assertion
// on ctx.Lookup("metadata")) for modules that own internal topics: the group coordinator
// creates __consumer_offsets with it, the transaction coordinator __transaction_state.
type TopicCreator interface {
	// CreateTopic creates the topic (partitions and rf of -1 take the broker defaults)
	// and returns it once this broker's image has it. An existing topic is returned as
	// it is, with no error, so concurrent creators agree.
	CreateTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string) (*TopicImage, error)
}

// Endpoint returns the broker's endpoint on the named listener. With no listener name
// (a connection the kernel did not label) it returns the first endpoint.
func (b *BrokerImage) Endpoint(listener string) (ListenerInfo, bool) {
	for _, e := range b.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	if listener == "" && len(b.Endpoints) > 0 {
		return b.Endpoints[0], true
	}
	return ListenerInfo{}, false
}

// ExtensionStore is an optional interface of the metadata module (found by type
// assertion on ctx.Lookup("metadata")): namespaced key/value records in the metadata
// log for modules that need small, durable, cluster-wide state that every broker sees
// (transform deployments). Values are opaque to the metadata module; each namespace's
// owner defines and versions its format. Image.Extensions holds the current values.
type ExtensionStore interface {
	// PutExtension sets namespace/key to value (nil deletes it) through the metadata
	// log and returns once this broker's image has the change. Values are bounded by
	// MaxExtensionValueBytes.
	PutExtension(ctx context.Context, namespace, key string, value []byte) error
}

// MaxExtensionValueBytes bounds one extension value (a compressed WASM binary fits).
const MaxExtensionValueBytes = 32 << 20

// Extension returns the value of namespace/key, or nil. Callers must not modify it.
func (im *Image) Extension(namespace, key string) []byte {
	if im == nil {
		return nil
	}
	return im.Extensions[namespace][key]
}

// PartitionChanger is an optional interface of the metadata module (found by type
// assertion on ctx.Lookup("metadata")): the partition leader's way to change the ISR
// through the controller (Kafka's AlterPartition), so that every ISR change is in the
// metadata log with a new partition epoch.
type PartitionChanger interface {
	// AlterPartition proposes req.ISR as the partition's ISR and returns the partition
	// from this broker's image once the accepted change is applied: that may already be
	// newer than the change (the controller shrank the ISR, moved the leader, completed
	// a reassignment), so take Leader, LeaderEpoch and PartitionEpoch from it. An ISR
	// equal to the current one as a set keeps the partition epoch; ISR changes never
	// bump the leader epoch. The controller accepts it only when
	//   - the topic (by ID) and partition exist (else an error wrapping
	//     kerr.UnknownTopicOrPartition / kerr.UnknownTopicID),
	//   - req.Leader is the partition's leader and req.LeaderEpoch its leader epoch
	//     (else kerr.FencedLeaderEpoch; kerr.NotLeaderForPartition, Kafka's
	//     NOT_LEADER_OR_FOLLOWER, when req.Leader is not the leader),
	//   - req.PartitionEpoch is its partition epoch (else kerr.InvalidUpdateVersion),
	//   - the ISR is non-empty, holds the leader, has no duplicates and only replicas
	//     (else kerr.InvalidRequest), and every member it adds is a registered,
	//     unfenced broker (else kerr.IneligibleReplica).
	// Errors wrap a *kerr.Error (also kerr.NotController/RequestTimedOut when the
	// controller cannot be reached) or ctx.Err().
	AlterPartition(ctx context.Context, req AlterPartitionRequest) (PartitionImage, error)
}

// AlterPartitionRequest is one ISR change proposed by a partition's leader.
type AlterPartitionRequest struct {
	Topic          string
	TopicID        [16]byte
	Partition      int32
	Leader         int32 // the proposing broker
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// Resign: the leader's log is offline (ErrLogOffline) and it leaves the partition:
	// ISR omits it and the change sets the leader to -1 (leader epoch + 1), so that the
	// controller elects a live ISR member.
	Resign bool
}
