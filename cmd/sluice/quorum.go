package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The controller-quorum commands of `sluice cluster` (KIP-853), as Kafka's
// kafka-metadata-quorum.sh describe, add-controller and remove-controller do them.

// clusterQuorum describes the metadata quorum (DescribeQuorum): the controller, the
// voters and the observers with their log end offsets.
func clusterQuorum(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+"\n", stderr)
	if _, err := kf.parse(fs, args, 0, 0, ""); err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(1)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err == nil {
		err = kerrOf(resp.ErrorCode, resp.ErrorMessage)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = fmt.Errorf("the answer names %d topics", len(resp.Topics))
	}
	if err != nil {
		return err
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerrOf(p.ErrorCode, p.ErrorMessage); err != nil {
		return err
	}
	type member struct {
		Node      int32  `json:"node"`
		Role      string `json:"role"`
		LogEnd    int64  `json:"log_end_offset"`
		Lag       int64  `json:"lag"`
		LastFetch int64  `json:"last_fetch_ms,omitempty"`
		Address   string `json:"address,omitempty"`
	}
	out := struct {
		Leader        int32    `json:"leader"`
		Epoch         int32    `json:"epoch"`
		HighWatermark int64    `json:"high_watermark"`
		Members       []member `json:"members"`
	}{Leader: p.LeaderID, Epoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, Members: []member{}}
	addrs := map[int32]string{}
	for _, n := range resp.Nodes {
		if len(n.Listeners) > 0 {
			addrs[n.NodeID] = n.Listeners[0].Host + ":" + strconv.Itoa(int(n.Listeners[0].Port))
		}
	}
	add := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		for _, r := range rs {
			m := member{Node: r.ReplicaID, Role: role, LogEnd: r.LogEndOffset, LastFetch: r.LastFetchTimestamp, Address: addrs[r.ReplicaID]}
			if r.ReplicaID == p.LeaderID {
				m.Role = "leader"
			}
			if r.LogEndOffset >= 0 {
				m.Lag = max(p.HighWatermark-r.LogEndOffset, 0)
			}
			out.Members = append(out.Members, m)
		}
	}
	add(p.CurrentVoters, "voter")
	add(p.Observers, "observer")
	if kf.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "leader %d, epoch %d, high watermark %d\n", out.Leader, out.Epoch, out.HighWatermark)
	t := newTable(stdout, "NODE", "ROLE", "LOG-END", "LAG", "LAST-FETCH", "RAFT-ADDRESS")
	for _, m := range out.Members {
		fetch := "-"
		if m.LastFetch > 0 {
			fetch = time.UnixMilli(m.LastFetch).UTC().Format(time.RFC3339)
		}
		t.row(m.Node, m.Role, m.LogEnd, m.Lag, fetch, m.Address)
	}
	t.flush()
	return nil
}

// clusterAddVoter makes observers voters (AddRaftVoter), one at a time.
func clusterAddVoter(prog string, args []string, stdout, stderr io.Writer) error {
	return changeVoters(prog, args, stdout, stderr, true)
}

// clusterRemoveVoter takes voters out of the quorum (RemoveRaftVoter), one at a time.
func clusterRemoveVoter(prog string, args []string, stdout, stderr io.Writer) error {
	return changeVoters(prog, args, stdout, stderr, false)
}

func changeVoters(prog string, args []string, stdout, stderr io.Writer, add bool) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" NODE_ID...\n", stderr)
	ids, err := kf.parse(fs, args, 1, -1, "node id")
	if err != nil {
		return err
	}
	nums := make([]int32, len(ids))
	for i, id := range ids {
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil {
			return usageError{fmt.Sprintf("node id %q: want a number", id)}
		}
		nums[i] = int32(n)
	}
	ctx, adm, done, err := kf.connect(2 * len(ids))
	if err != nil {
		return err
	}
	defer done()
	errs := map[string]error{}
	for i, id := range ids {
		var err error
		if add {
			req := kmsg.NewPtrAddRaftVoterRequest()
			req.VoterID, req.TimeoutMillis, req.AckWhenCommitted = nums[i], 30000, true
			var resp *kmsg.AddRaftVoterResponse
			if resp, err = req.RequestWith(ctx, adm.kgo); err == nil {
				err = withReason(resp.ErrorCode, resp.ErrorMessage)
			}
		} else {
			req := kmsg.NewPtrRemoveRaftVoterRequest()
			req.VoterID = nums[i]
			var resp *kmsg.RemoveRaftVoterResponse
			if resp, err = req.RequestWith(ctx, adm.kgo); err == nil {
				err = withReason(resp.ErrorCode, resp.ErrorMessage)
			}
		}
		errs[id] = err
	}
	status := "removed"
	if add {
		status = "added"
	}
	return printStatuses(stdout, kf.json, "NODE", status, ids, func(id string) error { return errs[id] }, "voter changes")
}
