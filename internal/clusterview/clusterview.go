// Package clusterview sums up a cluster as a Kafka client sees it (a Metadata
// answer): each broker with the partitions it leads and holds, and the counts of
// topics, partitions, under-replicated and offline partitions. The CLI's `cluster
// info` and the web console print the same figures from it.
//
//	md, _ := adm.Metadata(ctx)
//	s := clusterview.Summarize(md.Topics, md.Brokers, md.Controller)
package clusterview

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Broker is one broker with its share of the partitions.
type Broker struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
	Leaders    int    `json:"leaders"`  // partitions it leads
	Replicas   int    `json:"replicas"` // replicas it holds
}

// Summary is the cluster's figures.
type Summary struct {
	Topics          int      // topics without an error
	Partitions      int      // their partitions
	UnderReplicated int      // partitions whose ISR is smaller than their replica set
	Offline         int      // partitions without a leader
	Brokers         []Broker // by id
}

// Summarize counts topics' partitions per broker; controller marks its broker.
func Summarize(topics kadm.TopicDetails, brokers kadm.BrokerDetails, controller int32) Summary {
	var s Summary
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, t := range topics {
		if t.Err != nil {
			continue
		}
		s.Topics++
		for _, p := range t.Partitions {
			s.Partitions++
			if p.Leader < 0 {
				s.Offline++
			} else {
				leaders[p.Leader]++
			}
			if len(p.ISR) < len(p.Replicas) {
				s.UnderReplicated++
			}
			for _, r := range p.Replicas {
				replicas[r]++
			}
		}
	}
	s.Brokers = make([]Broker, 0, len(brokers))
	for _, b := range brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		s.Brokers = append(s.Brokers, Broker{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: rack,
			Controller: b.NodeID == controller, Leaders: leaders[b.NodeID], Replicas: replicas[b.NodeID]})
	}
	slices.SortFunc(s.Brokers, func(a, b Broker) int { return int(a.ID) - int(b.ID) })
	return s
}
