package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const reassignUsage = `usage: sluice topic reassign TOPIC -p PARTITION:BROKER,BROKER... [-p ...] [flags]
       sluice topic reassign TOPIC --cancel -p PARTITION [-p ...]

Moves partitions' replicas to the brokers listed (the first is the preferred
leader; a different count changes the replication factor), then waits until every
new replica has caught up and the old ones are gone, with a progress line on a
terminal. --no-wait returns once the controller has accepted the move.
`

// reassignPoll is how often a waiting reassign asks how far the move has come.
const reassignPoll = 250 * time.Millisecond

// partitionMoves parses repeated -p PARTITION[:BROKER,BROKER...] flags.
type partitionMoves []string

func (m *partitionMoves) String() string     { return strings.Join(*m, " ") }
func (m *partitionMoves) Set(s string) error { *m = append(*m, s); return nil }

// parse returns the target replicas by partition (nil targets when cancel).
func (m partitionMoves) parse(cancel bool) (map[int32][]int32, error) {
	out := map[int32][]int32{}
	for _, s := range m {
		ps, bs, hasBrokers := strings.Cut(s, ":")
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			return nil, usageError{fmt.Sprintf("-p %q: want PARTITION:BROKER,BROKER... (a partition number)", s)}
		}
		if _, dup := out[int32(p)]; dup {
			return nil, usageError{fmt.Sprintf("partition %d given twice", p)}
		}
		if cancel {
			if hasBrokers {
				return nil, usageError{"--cancel takes partitions without brokers: -p PARTITION"}
			}
			out[int32(p)] = nil
			continue
		}
		if !hasBrokers || bs == "" {
			return nil, usageError{fmt.Sprintf("-p %q: name the brokers, PARTITION:BROKER,BROKER...", s)}
		}
		var brokers []int32
		for _, b := range strings.Split(bs, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
			if err != nil || id < 0 {
				return nil, usageError{fmt.Sprintf("-p %q: broker %q is not a broker id", s, b)}
			}
			if slices.Contains(brokers, int32(id)) {
				return nil, usageError{fmt.Sprintf("-p %q: broker %d listed twice", s, id)}
			}
			brokers = append(brokers, int32(id))
		}
		out[int32(p)] = brokers
	}
	if len(out) == 0 {
		return nil, usageError{"name the partitions to move: -p PARTITION:BROKER,BROKER..."}
	}
	return out, nil
}

// reassignRow is one partition's outcome.
type reassignRow struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas,omitempty"`
	Adding    []int32 `json:"adding,omitempty"`
	Removing  []int32 `json:"removing,omitempty"`
	Status    string  `json:"status"`
	Error     string  `json:"error,omitempty"`
}

func topicReassign(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, reassignUsage, stderr)
	var moves partitionMoves
	fs.Var(&moves, "p", "PARTITION:BROKER,BROKER... (repeatable; with --cancel just PARTITION)")
	fs.Var(&moves, "partition", "the same as -p")
	cancel := fs.Bool("cancel", false, "cancel the partitions' ongoing reassignments")
	noWait := fs.Bool("no-wait", false, "return once the move is accepted")
	wait := fs.Duration("wait", 30*time.Minute, "how long to wait for the move to finish")
	pos, err := kf.parse(fs, args, 1, 1, "topic name")
	if err != nil {
		return err
	}
	topic := pos[0]
	targets, err := moves.parse(*cancel)
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	var req kadm.AlterPartitionAssignmentsReq
	for p, brokers := range targets {
		req.Assign(topic, p, brokers)
	}
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return err
	}
	rows := make([]reassignRow, 0, len(targets))
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		r := reassignRow{Topic: topic, Partition: p, Replicas: targets[p], Status: "started"}
		if *cancel {
			r.Status = "cancelled"
		}
		if pr, ok := res[topic][p]; !ok {
			r.Error = "no answer for this partition"
		} else if pr.Err != nil {
			r.Error = errWithMessage(pr.Err, pr.ErrMessage)
		}
		if r.Error != "" {
			r.Status = "failed"
		}
		rows = append(rows, r)
	}
	if !*noWait && !*cancel {
		if err := waitReassign(adm, kf.timeout, *wait, topic, rows, stderr); err != nil {
			printReassign(stdout, kf.json, rows)
			return err
		}
	}
	if err := printReassign(stdout, kf.json, rows); err != nil {
		return err
	}
	bad := 0
	for _, r := range rows {
		if r.Error != "" {
			bad++
		}
	}
	return failed(bad, "partition reassignments")
}

// waitReassign polls until none of rows' accepted moves is ongoing, marking each
// "done" as it finishes, or until wait passes.
func waitReassign(adm *adminConn, timeout, wait time.Duration, topic string, rows []reassignRow, stderr io.Writer) error {
	tty := isTerminal(stderr)
	deadline := time.Now().Add(wait)
	var lastProgress time.Time
	for {
		set := kadm.TopicsSet{}
		for _, r := range rows {
			if r.Status == "started" {
				set.Add(topic, r.Partition)
			}
		}
		if len(set) == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		ongoing, err := adm.ListPartitionReassignments(ctx, set)
		cancel()
		if err != nil {
			return fmt.Errorf("asking how far the reassignment has come: %w", err)
		}
		left := 0
		for i := range rows {
			r := &rows[i]
			if r.Status != "started" {
				continue
			}
			if o, ok := ongoing[topic][r.Partition]; ok {
				r.Adding, r.Removing = o.AddingReplicas, o.RemovingReplicas
				left++
				continue
			}
			r.Status, r.Adding, r.Removing = "done", nil, nil
		}
		if left == 0 {
			break
		}
		if tty {
			if now := time.Now(); now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				fmt.Fprintf(stderr, "\rreassigning %s: %d of %d partitions still moving", topic, left, countStatus(rows, "started", "done"))
			}
		}
		if time.Now().After(deadline) {
			for i := range rows {
				if rows[i].Status == "started" {
					rows[i].Status = "in progress"
				}
			}
			return fmt.Errorf("%d partitions still moving after %v: the move goes on (see `sluice topic describe %s`; cancel with --cancel)", left, wait, topic)
		}
		time.Sleep(reassignPoll)
	}
	if tty {
		fmt.Fprintf(stderr, "\rreassigning %s: done%s\n", topic, strings.Repeat(" ", 30))
	}
	return nil
}

// countStatus counts the rows with any of statuses.
func countStatus(rows []reassignRow, statuses ...string) int {
	n := 0
	for _, r := range rows {
		if slices.Contains(statuses, r.Status) {
			n++
		}
	}
	return n
}

func printReassign(w io.Writer, asJSON bool, rows []reassignRow) error {
	if asJSON {
		return printJSON(w, rows)
	}
	t := newTable(w, "TOPIC", "PARTITION", "REPLICAS", "STATUS")
	for _, r := range rows {
		status := r.Status
		switch {
		case r.Error != "":
			status = r.Error
		case len(r.Adding) > 0 || len(r.Removing) > 0:
			status += fmt.Sprintf(" (adding %s, removing %s)", int32List(r.Adding), int32List(r.Removing))
		}
		t.row(r.Topic, r.Partition, int32List(r.Replicas), status)
	}
	t.flush()
	return nil
}
