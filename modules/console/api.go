package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/internal/clusterview"
)

// badRequest is a malformed or oversized request: 400 with its message.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// forbidden is a request the admin principal may not make: 403.
type forbidden struct{ msg string }

func (e forbidden) Error() string { return e.msg }

// notFound is an unknown topic or group: 404.
type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }

// api adapts an endpoint to HTTP: its answer as JSON, its error as a status and
// {"error": message}.
func (m *Module) api(fn func(ctx context.Context, r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		out, err := fn(ctx, r)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			code := http.StatusBadGateway
			var br badRequest
			var fb forbidden
			var nf notFound
			switch {
			case errors.As(err, &br):
				code = http.StatusBadRequest
			case errors.As(err, &fb):
				code = http.StatusForbidden
			case errors.As(err, &nf):
				code = http.StatusNotFound
			case errors.Is(err, errUnavailable):
				code = http.StatusServiceUnavailable
			default:
				m.log.Debug("console request failed", "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

type clusterJSON struct {
	ClusterID       string               `json:"cluster_id"`
	Controller      int32                `json:"controller"`
	Brokers         []clusterview.Broker `json:"brokers"`
	Topics          int                  `json:"topics"`
	Partitions      int                  `json:"partitions"`
	UnderReplicated int                  `json:"under_replicated_partitions"`
	Offline         int                  `json:"offline_partitions"`
	Broker          int32                `json:"serving_broker"`
}

func (m *Module) cluster(ctx context.Context, _ *http.Request) (any, error) {
	adm, _, err := m.client()
	if err != nil {
		return nil, err
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	s := clusterview.Summarize(md.Topics, md.Brokers, md.Controller)
	return clusterJSON{ClusterID: md.Cluster, Controller: md.Controller, Brokers: s.Brokers, Topics: s.Topics,
		Partitions: s.Partitions, UnderReplicated: s.UnderReplicated, Offline: s.Offline, Broker: m.broker.NodeID}, nil
}

type topicJSON struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Internal          bool   `json:"internal"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	UnderReplicated   int    `json:"under_replicated"`
	Offline           int    `json:"offline"`
	Records           int64  `json:"records"`
	Bytes             int64  `json:"bytes"`
	Error             string `json:"error,omitempty"`
}

func (m *Module) topics(ctx context.Context, _ *http.Request) (any, error) {
	adm, _, err := m.client()
	if err != nil {
		return nil, err
	}
	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, err
	}
	names := td.Names()
	starts, _ := adm.ListStartOffsets(ctx, names...)
	ends, _ := adm.ListEndOffsets(ctx, names...)
	sizes := m.sizes(ctx, adm, nil)
	out := make([]topicJSON, 0, len(td))
	for _, t := range td.Sorted() {
		tj := topicJSON{Name: t.Topic, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: len(t.Partitions)}
		if t.Err != nil {
			tj.Error = t.Err.Error()
		}
		for _, p := range t.Partitions {
			tj.ReplicationFactor = max(tj.ReplicationFactor, len(p.Replicas))
			if p.Leader < 0 {
				tj.Offline++
			}
			if len(p.ISR) < len(p.Replicas) {
				tj.UnderReplicated++
			}
			s, sok := starts.Lookup(t.Topic, p.Partition)
			e, eok := ends.Lookup(t.Topic, p.Partition)
			if sok && eok && s.Err == nil && e.Err == nil {
				tj.Records += max(e.Offset-s.Offset, 0)
			}
			tj.Bytes += sizes[partKey{t.Topic, p.Partition}]
		}
		out = append(out, tj)
	}
	return out, nil
}

// partKey names a partition.
type partKey struct {
	topic     string
	partition int32
}

// sizes returns each partition's size, the largest among its replicas
// (DescribeLogDirs of every broker); a broker that fails to answer leaves its out.
func (m *Module) sizes(ctx context.Context, adm *kadm.Client, topics kadm.TopicsSet) map[partKey]int64 {
	out := map[partKey]int64{}
	dirs, err := adm.DescribeAllLogDirs(ctx, topics)
	if err != nil && len(dirs) == 0 {
		return out
	}
	for _, d := range dirs.Sorted() {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			k := partKey{p.Topic, p.Partition}
			out[k] = max(out[k], p.Size)
		})
	}
	return out
}

type partitionJSON struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Offline     []int32 `json:"offline_replicas,omitempty"`
	StartOffset int64   `json:"start_offset"`
	EndOffset   int64   `json:"end_offset"`
	Bytes       int64   `json:"bytes"`
	Error       string  `json:"error,omitempty"`
}

type configJSON struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

type topicDetailJSON struct {
	topicJSON
	PartitionList []partitionJSON `json:"partition_list"`
	Configs       []configJSON    `json:"configs"`
}

func (m *Module) topic(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("topic")
	adm, _, err := m.client()
	if err != nil {
		return nil, err
	}
	td, err := adm.ListTopicsWithInternal(ctx, name)
	if err != nil {
		return nil, err
	}
	t, ok := td[name]
	if !ok || t.Err != nil {
		return nil, notFound{"no topic " + name}
	}
	starts, _ := adm.ListStartOffsets(ctx, name)
	ends, _ := adm.ListEndOffsets(ctx, name)
	set := kadm.TopicsSet{}
	for p := range t.Partitions {
		set.Add(name, p)
	}
	sizes := m.sizes(ctx, adm, set)
	out := topicDetailJSON{topicJSON: topicJSON{Name: name, ID: topicID(t.ID), Internal: t.IsInternal, Partitions: len(t.Partitions)}}
	for _, p := range t.Partitions.Sorted() {
		pj := partitionJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas,
			ISR: p.ISR, Offline: p.OfflineReplicas, StartOffset: -1, EndOffset: -1, Bytes: sizes[partKey{name, p.Partition}]}
		if p.Err != nil {
			pj.Error = p.Err.Error()
		}
		if s, ok := starts.Lookup(name, p.Partition); ok && s.Err == nil {
			pj.StartOffset = s.Offset
		}
		if e, ok := ends.Lookup(name, p.Partition); ok && e.Err == nil {
			pj.EndOffset = e.Offset
		}
		out.ReplicationFactor = max(out.ReplicationFactor, len(p.Replicas))
		if p.Leader < 0 {
			out.Offline++
		}
		if len(p.ISR) < len(p.Replicas) {
			out.UnderReplicated++
		}
		if pj.StartOffset >= 0 && pj.EndOffset >= 0 {
			out.Records += pj.EndOffset - pj.StartOffset
		}
		out.Bytes += pj.Bytes
		out.PartitionList = append(out.PartitionList, pj)
	}
	if rcs, err := adm.DescribeTopicConfigs(ctx, name); err == nil {
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				out.Configs = append(out.Configs, configJSON{Name: c.Key, Value: c.Value, Source: strings.ToUpper(c.Source.String()), Sensitive: c.Sensitive})
			}
		}
	}
	slices.SortFunc(out.Configs, func(a, b configJSON) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// topicID prints a topic id as Kafka does (URL-safe base64, unpadded).
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// encode returns b as a JSON-friendly string and its encoding ("utf8", or "base64"
// for bytes that are not UTF-8), cut at maxField bytes.
func encode(b []byte) (s, enc string, truncated bool) {
	if len(b) > maxField {
		b, truncated = b[:maxField], true
	}
	if isText(b) {
		return string(b), "utf8", truncated
	}
	return base64.StdEncoding.EncodeToString(b), "base64", truncated
}
