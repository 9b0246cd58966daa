package metadata

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Leader elections asked for by an admin (ElectLeaders) and the controller's automatic
// preferred-leader rebalance.

// Election types of ElectLeaders (Kafka's values).
const (
	electPreferred int8 = 0
	electUnclean   int8 = 1
)

// maxReplans bounds how often proposePlanned plans an entry again after it was
// rejected as stale.
const maxReplans = 3

// planElection returns the entry an election of type typ makes for partition p of t on
// im, or the reason there is none: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE.
//
//   - Preferred: the first replica leads, if it is live and in the ISR.
//   - Unclean: only for a partition without a live leader; the first live ISR member in
//     replica order leads, else the first live replica with the ISR {it}.
//
// The entry is validated by Apply (version 2), so a leader fenced in the meantime is
// refused (errIneligibleReplica) rather than elected.
func planElection(im *kernel.Image, t *kernel.TopicImage, p *kernel.PartitionImage, typ int8) (*image.PartitionChangeRecord, error) {
	alive := func(id int32) bool { b := im.Brokers[id]; return b != nil && !b.Fenced }
	rec := &image.PartitionChangeRecord{Topic: t.Name, ID: t.ID, Partition: p.Partition, PartitionEpoch: p.PartitionEpoch,
		PartitionChangeV2: image.PartitionChangeV2{Validate: true}}
	switch typ {
	case electPreferred:
		pref := p.Replicas[0]
		switch {
		case p.Leader == pref:
			return nil, opErr(kerr.ElectionNotNeeded, "")
		case !alive(pref) || !slices.Contains(p.ISR, pref):
			return nil, opErr(kerr.PreferredLeaderNotAvailable, "preferred replica %d is not a live ISR member (ISR %v)", pref, p.ISR)
		}
		rec.Leader = &pref
	case electUnclean:
		if alive(p.Leader) {
			return nil, opErr(kerr.ElectionNotNeeded, "")
		}
		for _, r := range p.Replicas {
			if alive(r) && slices.Contains(p.ISR, r) {
				rec.Leader = &r
				return rec, nil
			}
		}
		i := slices.IndexFunc(p.Replicas, alive)
		if i < 0 {
			return nil, opErr(kerr.EligibleLeadersNotAvailable, "no replica of %v is a live broker", p.Replicas)
		}
		leader := p.Replicas[i]
		rec.Leader, rec.ISR = &leader, []int32{leader}
	default:
		return nil, opErr(kerr.InvalidRequest, "unknown election type %d", typ)
	}
	return rec, nil
}

// planPartitions proposes, through proposePlanned, the record plan makes for each of n
// partitions (where names the i-th) and returns one error per partition: denied for every
// one when denied is not nil (nothing is proposed then), UNKNOWN_TOPIC_OR_PARTITION for
// a topic or partition the image lacks. plan returns a nil record and an error, or a
// record and nil. ms bounds the wait, as withTimeout.
func (c *controller) planPartitions(ctx context.Context, ms int32, denied error, n int,
	where func(i int) (topic string, partition int32),
	plan func(im *kernel.Image, t *kernel.TopicImage, p *kernel.PartitionImage, i int) (*image.PartitionChangeRecord, error)) []error {
	if denied != nil {
		errs := make([]error, n)
		for i := range errs {
			errs[i] = denied
		}
		return errs
	}
	ctx, cancel := withTimeout(ctx, ms)
	defer cancel()
	return c.proposePlanned(ctx, n, func(im *kernel.Image, i int) (image.Record, error) {
		topic, partition := where(i)
		t := im.Topic(topic)
		if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
			return nil, opErr(kerr.UnknownTopicOrPartition, "")
		}
		rec, err := plan(im, t, &t.Partitions[partition], i)
		if rec == nil { // a nil *image.PartitionChangeRecord is not a nil record
			return nil, err
		}
		return rec, nil
	})
}

// proposePlanned plans one entry per item on the current image (plan returns nil and
// the item's outcome when there is nothing to propose) and proposes them together. An
// entry Apply rejects as stale (its partition changed after it was planned) is planned
// again on the newer image, at most maxReplans times. errs[i] is item i's outcome.
func (c *controller) proposePlanned(ctx context.Context, n int, plan func(im *kernel.Image, i int) (image.Record, error)) []error {
	errs := make([]error, n)
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	im := c.hub.image()
	for round := 0; len(todo) > 0; round++ {
		var recs []image.Record
		var at []int
		for _, i := range todo {
			rec, err := plan(im, i)
			if errs[i] = err; err == nil && rec != nil {
				recs = append(recs, rec)
				at = append(at, i)
			}
		}
		if len(recs) == 0 {
			break
		}
		var perrs []error
		im, perrs = c.proposeAll(ctx, recs)
		todo = todo[:0]
		for j, i := range at {
			errs[i] = perrs[j]
			if errors.Is(perrs[j], image.ErrStale) && round < maxReplans {
				todo = append(todo, i)
			}
		}
	}
	return errs
}

// electLeadersResp serves ElectLeaders: null topics elect every partition (and leave
// out the ones that need no election, as Kafka does).
func (c *controller) electLeadersResp(ctx context.Context, req *kernel.Request, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.Version = r.Version
	typ := r.ElectionType
	if r.Version == 0 {
		typ = electPreferred
	}
	type item struct {
		topic     string
		partition int32
	}
	im := c.hub.image()
	var items []item
	all := r.Topics == nil
	if all {
		for _, name := range slices.Sorted(im.TopicNames()) {
			for _, p := range im.Topic(name).Partitions {
				items = append(items, item{name, p.Partition})
			}
		}
	} else {
		seen := map[item]bool{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if it := (item{t.Topic, p}); !seen[it] {
					seen[it] = true
					items = append(items, it)
				}
			}
		}
	}
	var denied error
	switch {
	case !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName):
		denied = opErr(kerr.ClusterAuthorizationFailed, "")
	case typ != electPreferred && typ != electUnclean:
		denied = opErr(kerr.InvalidRequest, "unknown election type %d", typ)
	}
	if denied != nil && r.Version >= 1 {
		resp.ErrorCode, _ = errCode(denied)
	}
	errs := c.planPartitions(ctx, r.TimeoutMillis, denied, len(items),
		func(i int) (string, int32) { return items[i].topic, items[i].partition },
		func(im *kernel.Image, t *kernel.TopicImage, p *kernel.PartitionImage, _ int) (*image.PartitionChangeRecord, error) {
			return planElection(im, t, p, typ)
		})
	topicAt := map[string]int{}
	for i, it := range items {
		err := electionError(errs[i], typ)
		if all && errors.Is(err, kerr.ElectionNotNeeded) {
			continue
		}
		if err == nil {
			c.log.Info("elected leader", "topic", it.topic, "partition", it.partition, "election", electionName(typ))
		}
		at := topicSlot(topicAt, it.topic, &resp.Topics, func() kmsg.ElectLeadersResponseTopic {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = it.topic
			return rt
		})
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = it.partition
		rp.ErrorCode, rp.ErrorMessage = errCode(err)
		resp.Topics[at].Partitions = append(resp.Topics[at].Partitions, rp)
	}
	return resp
}

// plannedError turns the outcome of a planned admin change (ElectLeaders,
// AlterPartitionReassignments) into what the client gets: a broker fenced between
// planning and Apply is reported as ineligible, a partition that kept changing as a
// timeout (retriable).
func plannedError(err error, ineligible *kerr.Error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, image.ErrIneligibleReplica), errors.Is(err, image.ErrUnknownBroker):
		return opErr(ineligible, "%v", err)
	case errors.Is(err, image.ErrStale):
		return opErr(kerr.RequestTimedOut, "the partition kept changing: %v", err)
	case errors.Is(err, image.ErrUnknownTopic):
		return opErr(kerr.UnknownTopicOrPartition, "")
	}
	return err
}

// electionError is plannedError for an election of type typ.
func electionError(err error, typ int8) error {
	if typ == electPreferred {
		return plannedError(err, kerr.PreferredLeaderNotAvailable)
	}
	return plannedError(err, kerr.EligibleLeadersNotAvailable)
}

func electionName(typ int8) string {
	if typ == electUnclean {
		return "unclean"
	}
	return "preferred"
}

// imbalancedLeaders returns the preferred-leader elections of the automatic rebalance
// (auto.leader.rebalance.enable): for each broker whose share of the partitions that
// prefer it (it is their first replica) but are led by another exceeds pct percent,
// every such partition whose preferred replica is live and in the ISR. The entries are
// version 1, checked against the partition epoch: the controller plans them on its own
// latest image, where it decides liveness itself.
func imbalancedLeaders(im *kernel.Image, pct int32) []image.Record {
	alive := func(id int32) bool { b := im.Brokers[id]; return b != nil && !b.Fenced }
	total, notLed := map[int32]int{}, map[int32]int{}
	for _, t := range im.Topics() {
		for _, p := range t.Partitions {
			pref := p.Replicas[0]
			total[pref]++
			if p.Leader != pref {
				notLed[pref]++
			}
		}
	}
	var out []image.Record
	for _, name := range slices.Sorted(im.TopicNames()) {
		t := im.Topic(name)
		for _, p := range t.Partitions {
			pref := p.Replicas[0]
			// notLed/total > pct/100, in integers.
			if p.Leader == pref || int64(notLed[pref])*100 <= int64(pct)*int64(total[pref]) {
				continue
			}
			if !alive(pref) || !slices.Contains(p.ISR, pref) {
				continue
			}
			out = append(out, &image.PartitionChangeRecord{Topic: t.Name, ID: t.ID, Partition: p.Partition, PartitionEpoch: p.PartitionEpoch, Leader: &pref})
		}
	}
	return out
}

// rebalanceLeaders proposes the automatic rebalance's elections (see imbalancedLeaders).
func (c *controller) rebalanceLeaders(ctx context.Context, pct int32) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	im := c.hub.image()
	recs := imbalancedLeaders(im, pct)
	if len(recs) == 0 {
		return
	}
	_, _, errs := c.proposeLocal(ctx, recs)
	moved := 0
	for _, err := range errs {
		if err == nil {
			moved++
		}
	}
	c.log.Info("moved leaders back to preferred replicas", "changes", moved, "proposed", len(recs))
}

// topicSlot returns the index in *topics of the response topic named topic (index
// records where each name went), appending mk() when it is the first result for it:
// admin responses group their partition results by topic in request order.
func topicSlot[T any](index map[string]int, topic string, topics *[]T, mk func() T) int {
	at, ok := index[topic]
	if !ok {
		at = len(*topics)
		index[topic] = at
		*topics = append(*topics, mk())
	}
	return at
}
