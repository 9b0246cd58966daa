package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const reassignUsage = `usage: sluice topic reassign TOPIC -p PARTITION:BROKER,BROKER... [-p ...] [--throttle BYTES_PER_SEC] [flags]
       sluice topic reassign TOPIC --cancel -p PARTITION [-p ...]
       sluice topic reassign TOPIC --clear-throttle

Moves partitions' replicas to the brokers listed (the first is the preferred
leader; a different count changes the replication factor), then waits until every
new replica has caught up and the old ones are gone, with a progress line on a
terminal. --no-wait returns once the controller has accepted the move.

--throttle caps the move's replication at BYTES_PER_SEC on each broker involved,
as kafka-reassign-partitions.sh does: the moved partitions' current replicas go
into the topic's leader.replication.throttled.replicas, the added ones into its
follower.replication.throttled.replicas (merged with what the lists hold), and
leader.replication.throttled.rate and follower.replication.throttled.rate are set
on every broker of the old and new replica sets. Only replicas out of the ISR are
held back. Once the move is done the command removes what it added; with
--no-wait, a cancel, or a wait that fails it stays in place until
--clear-throttle, which deletes the topic's two throttled-replicas configs and
the two rates on every live broker.
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
	throttleArg := fs.String("throttle", "", "cap the move's replication at `BYTES_PER_SEC` on each broker involved")
	clearThr := fs.Bool("clear-throttle", false, "remove the topic's replication throttle and every broker's throttle rates")
	pos, err := kf.parse(fs, args, 1, 1, "topic name")
	if err != nil {
		return err
	}
	topic := pos[0]
	if *clearThr {
		if len(moves) > 0 || *cancel || *throttleArg != "" {
			return usageError{"--clear-throttle takes no -p, --cancel or --throttle"}
		}
		return clearThrottle(kf, topic, stdout)
	}
	var rate int64
	if *throttleArg != "" {
		if *cancel {
			return usageError{"--throttle applies to a move, not to --cancel"}
		}
		rate, err = strconv.ParseInt(*throttleArg, 10, 64)
		if err != nil || rate <= 0 {
			return usageError{fmt.Sprintf("--throttle %q: want a positive whole number of bytes per second", *throttleArg)}
		}
	}
	targets, err := moves.parse(*cancel)
	if err != nil {
		return err
	}
	spans := 2
	if rate > 0 {
		spans = 6 // metadata, topic configs read and written, broker configs, the move
	}
	ctx, adm, done, err := kf.connect(spans)
	if err != nil {
		return err
	}
	defer done()
	var thr *throttle
	if rate > 0 {
		if thr, err = planThrottle(ctx, adm, topic, targets, rate); err != nil {
			return err
		}
		if thr == nil {
			fmt.Fprintln(stderr, "no replica is added, so there is nothing to throttle")
		} else if err := thr.apply(ctx, adm); err != nil {
			return thr.failedApply(adm, kf.timeout, err)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	for p, brokers := range targets {
		req.Assign(topic, p, brokers)
	}
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		if thr != nil {
			fmt.Fprintln(stderr, thr.leftNote("the move may not have been submitted"))
		}
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
			if thr != nil {
				fmt.Fprintln(stderr, thr.leftNote("the move has not finished"))
			}
			return err
		}
		if thr != nil {
			// The command's context may have run out while waiting.
			cctx, stop := context.WithTimeout(context.Background(), 3*kf.timeout)
			err := thr.remove(cctx, adm)
			stop()
			if err != nil {
				printReassign(stdout, kf.json, rows)
				return fmt.Errorf("the move is done, but removing its throttle failed: %w\n  clear it with `sluice topic reassign %s --clear-throttle`", err, topic)
			}
			fmt.Fprintf(stderr, "removed the replication throttle of %s (brokers %s)\n", topic, int32List(thr.brokers))
		}
	} else if thr != nil {
		fmt.Fprintln(stderr, thr.leftNote("with --no-wait"))
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

// The configs of a replication throttle (KIP-73; modules/replication/throttle.go).
const (
	leaderThrottledReplicas   = "leader.replication.throttled.replicas"
	followerThrottledReplicas = "follower.replication.throttled.replicas"
	leaderThrottledRate       = "leader.replication.throttled.rate"
	followerThrottledRate     = "follower.replication.throttled.rate"
)

// throttle is the replication throttle of one move, as kafka-reassign-partitions.sh
// sets it: the moved partitions' current replicas throttled as leaders, the added
// ones as followers, the rate on every broker of the old and new replica sets.
type throttle struct {
	topic    string
	rate     int64
	leader   []string // "partition:broker" entries for leader.replication.throttled.replicas
	follower []string // and for follower.replication.throttled.replicas
	brokers  []int32  // sorted

	// What apply changed, so remove takes back only that: the list entries that were
	// not there before, and whether the rates were (perhaps partly) set.
	addedLeader, addedFollower []string
	ratesSet                   bool
}

// planThrottle returns the throttle of moving topic's partitions to targets at rate
// bytes per second, or nil when the move adds no replica (no data to copy).
// Partitions the metadata does not know are left out: the move answers for them.
func planThrottle(ctx context.Context, adm *adminConn, topic string, targets map[int32][]int32, rate int64) (*throttle, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: not in the metadata answer", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	t := &throttle{topic: topic, rate: rate}
	brokers := map[int32]bool{}
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		pd, ok := td.Partitions[p]
		if !ok {
			continue
		}
		var added []int32
		for _, b := range targets[p] {
			if !slices.Contains(pd.Replicas, b) {
				added = append(added, b)
			}
		}
		if len(added) == 0 {
			continue
		}
		for _, b := range pd.Replicas {
			t.leader = append(t.leader, fmt.Sprintf("%d:%d", p, b))
			brokers[b] = true
		}
		for _, b := range added {
			t.follower = append(t.follower, fmt.Sprintf("%d:%d", p, b))
			brokers[b] = true
		}
	}
	if len(t.follower) == 0 {
		return nil, nil
	}
	t.brokers = slices.Sorted(maps.Keys(brokers))
	return t, nil
}

// apply merges t's entries into the topic's throttled-replicas lists and sets the
// rates on t's brokers.
func (t *throttle) apply(ctx context.Context, adm *adminConn) error {
	cur, err := throttledLists(ctx, adm, t.topic)
	if err != nil {
		return err
	}
	var alter []kadm.AlterConfig
	var v string
	v, t.addedLeader = mergeThrottled(cur[leaderThrottledReplicas], t.leader)
	if len(t.addedLeader) > 0 {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: leaderThrottledReplicas, Value: &v})
	}
	var w string
	w, t.addedFollower = mergeThrottled(cur[followerThrottledReplicas], t.follower)
	if len(t.addedFollower) > 0 {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: followerThrottledReplicas, Value: &w})
	}
	if len(alter) > 0 {
		res, err := adm.AlterTopicConfigs(ctx, alter, t.topic)
		if err := alterErr("topic", []string{t.topic}, res, err); err != nil {
			return err
		}
	}
	rate := strconv.FormatInt(t.rate, 10)
	t.ratesSet = true
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: leaderThrottledRate, Value: &rate},
		{Op: kadm.SetConfig, Name: followerThrottledRate, Value: &rate},
	}, t.brokers...)
	return alterErr("broker", brokerNames(t.brokers), res, err)
}

// remove takes back what apply added: its entries in the topic's lists (a list
// left empty is deleted) and the rates of t's brokers.
func (t *throttle) remove(ctx context.Context, adm *adminConn) error {
	var errs []error
	if len(t.addedLeader) > 0 || len(t.addedFollower) > 0 {
		cur, err := throttledLists(ctx, adm, t.topic)
		if err != nil {
			return err
		}
		var alter []kadm.AlterConfig
		for _, e := range []struct {
			name  string
			added []string
		}{{leaderThrottledReplicas, t.addedLeader}, {followerThrottledReplicas, t.addedFollower}} {
			v := subtractThrottled(cur[e.name], e.added)
			switch {
			case v == cur[e.name]:
			case v == "":
				alter = append(alter, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: e.name})
			default:
				alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: e.name, Value: &v})
			}
		}
		if len(alter) > 0 {
			res, err := adm.AlterTopicConfigs(ctx, alter, t.topic)
			errs = append(errs, alterErr("topic", []string{t.topic}, res, err))
		}
	}
	if t.ratesSet {
		res, err := adm.AlterBrokerConfigs(ctx, deleteThrottleRates(), t.brokers...)
		errs = append(errs, alterErr("broker", brokerNames(t.brokers), res, err))
	}
	return errors.Join(errs...)
}

// failedApply is the error of an apply that failed (cause), after taking back what
// it did set.
func (t *throttle) failedApply(adm *adminConn, timeout time.Duration, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	if err := t.remove(ctx, adm); err != nil {
		return fmt.Errorf("setting the replication throttle: %w\n  nothing was moved, but removing what was set failed: %v\n  clear it with `sluice topic reassign %s --clear-throttle`", cause, err, t.topic)
	}
	return fmt.Errorf("setting the replication throttle: %w (nothing was moved)", cause)
}

// leftNote tells why t stays in place and how to clear it.
func (t *throttle) leftNote(why string) string {
	return fmt.Sprintf("%s: the replication throttle of %s (%d bytes/s on brokers %s) stays in place;\n  once the move is done, clear it with `sluice topic reassign %s --clear-throttle`",
		why, t.topic, t.rate, int32List(t.brokers), t.topic)
}

// throttledLists returns topic's two throttled-replicas lists ("" when unset).
func throttledLists(ctx context.Context, adm *adminConn, topic string) (map[string]string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	rc, err := rcs.On(topic, nil)
	if err == nil && rc.Err != nil {
		err = errors.New(errWithMessage(rc.Err, rc.ErrMessage))
	}
	if err != nil {
		return nil, fmt.Errorf("topic %s's configs: %w", topic, err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Key == leaderThrottledReplicas || c.Key == followerThrottledReplicas {
			out[c.Key] = strings.TrimSpace(c.MaybeValue())
		}
	}
	return out, nil
}

// mergeThrottled adds the entries of add missing from list (a throttled-replicas
// value) and returns the new value with the entries it added. "*" stays "*".
func mergeThrottled(list string, add []string) (string, []string) {
	if list == "*" {
		return list, nil
	}
	items := splitList(list)
	var added []string
	for _, e := range add {
		if !slices.Contains(items, e) {
			items = append(items, e)
			added = append(added, e)
		}
	}
	return strings.Join(items, ","), added
}

// subtractThrottled removes the entries of rm from list; "*" stays "*".
func subtractThrottled(list string, rm []string) string {
	if list == "*" {
		return list
	}
	items := slices.DeleteFunc(splitList(list), func(e string) bool { return slices.Contains(rm, e) })
	return strings.Join(items, ",")
}

// splitList splits a comma-separated config list, trimming its items.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// deleteThrottleRates are the changes that remove a broker's throttle rates.
func deleteThrottleRates() []kadm.AlterConfig {
	return []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderThrottledRate},
		{Op: kadm.DeleteConfig, Name: followerThrottledRate},
	}
}

// brokerNames are the config resource names of brokers.
func brokerNames(brokers []int32) []string {
	out := make([]string, len(brokers))
	for i, b := range brokers {
		out[i] = strconv.Itoa(int(b))
	}
	return out
}

// alterErr is the error of an alter of the resources named names (of kind): each
// one's error (see resultErr), joined.
func alterErr(kind string, names []string, res kadm.AlterConfigsResponses, err error) error {
	var errs []error
	for _, n := range names {
		if e := resultErr(res, err, n); e != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, n, e))
		}
	}
	return errors.Join(errs...)
}

// clearThrottle removes topic's two throttled-replicas configs and the throttle
// rates of every broker in the cluster's metadata, one status line each.
func clearThrottle(kf *kafkaFlags, topic string, stdout io.Writer) error {
	ctx, adm, done, err := kf.connect(3)
	if err != nil {
		return err
	}
	defer done()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	var brokers []int32
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	tres, terr := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas},
		{Op: kadm.DeleteConfig, Name: followerThrottledReplicas},
	}, topic)
	bres, berr := adm.AlterBrokerConfigs(ctx, deleteThrottleRates(), brokers...)
	names := []string{"topic " + topic}
	errOf := map[string]error{names[0]: resultErr(tres, terr, topic)}
	for _, b := range brokerNames(brokers) {
		n := "broker " + b
		names = append(names, n)
		errOf[n] = resultErr(bres, berr, b)
	}
	return printStatuses(stdout, kf.json, "RESOURCE", "cleared", names, func(n string) error { return errOf[n] }, "throttle removals")
}

// resultErr is resource name's error in an alter's answer: its own, else the
// request's (err), else a missing answer.
func resultErr(res kadm.AlterConfigsResponses, err error, name string) error {
	r, rerr := res.On(name, nil)
	switch {
	case rerr == nil && r.Err != nil:
		return errors.New(errWithMessage(r.Err, r.ErrMessage))
	case rerr == nil:
		return nil
	case err != nil:
		return err
	}
	return errors.New("no answer")
}
