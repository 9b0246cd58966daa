package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const groupUsage = `usage: sluice group <command> [flags]

commands:
  list                  groups with their type and state
  describe GROUP...     state, assignor, members and lag per partition (share groups:
                        start offset and lag per partition, and which members hold it)
  seek GROUP --to start|end|OFFSET|TIME [--topic TOPIC]...
                        move a group's committed offsets, or a share group's start
                        offsets (the group must be empty);
                        TIME is unix milliseconds or RFC 3339 (2026-12-01T10:00:00Z)
  delete GROUP...       delete groups (they must be empty)

` + kafkaHelp

func groupCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice group", groupUsage, args, stdout, stderr, []command{
		{[]string{"list", "ls"}, cliRun("sluice group list", groupList)},
		{[]string{"describe"}, cliRun("sluice group describe", groupDescribe)},
		{[]string{"seek"}, cliRun("sluice group seek", groupSeek)},
		{[]string{"delete"}, cliRun("sluice group delete", groupDelete)},
	})
}

func groupList(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+"\n", stderr)
	_, err := kf.parse(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	type row struct {
		Group        string `json:"group"`
		Type         string `json:"type,omitempty"`
		ProtocolType string `json:"protocol_type"`
		State        string `json:"state"`
		Coordinator  int32  `json:"coordinator"`
	}
	rows := []row{}
	for _, g := range groups.Sorted() {
		rows = append(rows, row{Group: g.Group, Type: g.GroupType, ProtocolType: g.ProtocolType, State: g.State, Coordinator: g.Coordinator})
	}
	if kf.json {
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "GROUP", "TYPE", "STATE", "COORDINATOR")
	for _, r := range rows {
		t.row(r.Group, r.Type, r.State, r.Coordinator)
	}
	t.flush()
	return nil
}

func groupDescribe(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" GROUP...\n", stderr)
	names, err := kf.parse(fs, args, 1, -1, "group name")
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(3)
	if err != nil {
		return err
	}
	defer done()
	shares := shareGroupsOf(ctx, adm, names)
	var others []string
	for _, n := range names {
		if _, ok := shares[n]; !ok {
			others = append(others, n)
		}
	}
	lags, err := adm.Lag(ctx, others...)
	if err != nil && len(others) > 0 {
		return err
	}
	type partRow struct {
		Topic      string `json:"topic"`
		Partition  int32  `json:"partition"`
		Current    int64  `json:"current_offset"` // -1: nothing committed
		LogEnd     int64  `json:"log_end_offset"`
		Lag        int64  `json:"lag"` // -1: unknown
		ConsumerID string `json:"consumer_id,omitempty"`
		Host       string `json:"host,omitempty"`
		ClientID   string `json:"client_id,omitempty"`
		Error      string `json:"error,omitempty"`
	}
	type groupOut struct {
		Group       string    `json:"group"`
		Type        string    `json:"type,omitempty"`
		Coordinator int32     `json:"coordinator"`
		State       string    `json:"state"`
		Protocol    string    `json:"protocol_type"`
		Assignor    string    `json:"assignor"`
		Members     int       `json:"members"`
		TotalLag    int64     `json:"total_lag"`
		Partitions  []partRow `json:"partitions"`
		Error       string    `json:"error,omitempty"`
	}
	var out []groupOut
	bad := 0
	for _, name := range names {
		if sg, ok := shares[name]; ok {
			// A share group (KIP-932): its start offsets and lag per partition.
			g := groupOut{Group: name, Type: "share", Coordinator: sg.Coordinator.NodeID, State: sg.GroupState,
				Protocol: "share", Assignor: sg.Assignor, Members: len(sg.Members), Partitions: []partRow{}}
			held := map[string]map[int32][]kadm.ShareGroupMember{}
			for _, m := range sg.Members {
				for t, ps := range m.Assignment {
					if held[t] == nil {
						held[t] = map[int32][]kadm.ShareGroupMember{}
					}
					for p := range ps {
						held[t][p] = append(held[t][p], m)
					}
				}
			}
			offs, err := adm.DescribeShareGroupOffsets(ctx, name)
			if err == nil {
				err = offs[name].Err
			}
			if err != nil {
				g.Error = errString(err)
				bad++
				out = append(out, g)
				continue
			}
			for _, o := range offs[name].Offsets.Sorted() {
				pr := partRow{Topic: o.Topic, Partition: o.Partition, Current: o.StartOffset, LogEnd: -1, Lag: o.Lag, Error: errString(o.Err)}
				if o.StartOffset >= 0 && o.Lag >= 0 {
					g.TotalLag += o.Lag
				}
				var ids, hosts, clients []string
				for _, m := range held[o.Topic][o.Partition] {
					ids, hosts, clients = append(ids, m.MemberID), append(hosts, m.ClientHost), append(clients, m.ClientID)
				}
				pr.ConsumerID, pr.Host, pr.ClientID = strings.Join(ids, ","), strings.Join(hosts, ","), strings.Join(clients, ",")
				g.Partitions = append(g.Partitions, pr)
			}
			out = append(out, g)
			continue
		}
		l, ok := lags[name]
		g := groupOut{Group: name, Partitions: []partRow{}}
		if !ok {
			g.Error = "no answer for this group"
		} else if err := l.Error(); err != nil {
			g.Error = errString(err)
		}
		if g.Error != "" {
			bad++
			out = append(out, g)
			continue
		}
		g.Coordinator, g.State, g.Protocol, g.Assignor, g.Members = l.Coordinator.NodeID, l.State, l.ProtocolType, l.Protocol, len(l.Members)
		g.TotalLag = l.Lag.Total()
		for _, ml := range l.Lag.Sorted() {
			pr := partRow{Topic: ml.Topic, Partition: ml.Partition, Current: ml.Commit.At, LogEnd: ml.End.Offset, Lag: ml.Lag, Error: errString(ml.Err)}
			if ml.End.Err != nil {
				pr.LogEnd = -1
			}
			if ml.Member != nil {
				pr.ConsumerID, pr.Host, pr.ClientID = ml.Member.MemberID, ml.Member.ClientHost, ml.Member.ClientID
			}
			g.Partitions = append(g.Partitions, pr)
		}
		out = append(out, g)
	}
	if kf.json {
		if err := printJSON(stdout, out); err != nil {
			return err
		}
		return failed(bad, "group descriptions")
	}
	dash := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	for i, g := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if g.Error != "" {
			fmt.Fprintf(stdout, "GROUP %s: %s\n", g.Group, g.Error)
			continue
		}
		t := newTable(stdout)
		t.row("GROUP", g.Group)
		if g.Type != "" {
			t.row("TYPE", g.Type)
		}
		t.row("COORDINATOR", g.Coordinator)
		t.row("STATE", g.State)
		t.row("ASSIGNOR", g.Assignor)
		t.row("MEMBERS", g.Members)
		t.row("TOTAL-LAG", g.TotalLag)
		t.flush()
		if len(g.Partitions) == 0 {
			continue
		}
		fmt.Fprintln(stdout)
		if g.Type == "share" {
			t = newTable(stdout, "TOPIC", "PARTITION", "START-OFFSET", "LAG", "CONSUMER-IDS")
			for _, p := range g.Partitions {
				t.row(p.Topic, p.Partition, dash(p.Current), dash(p.Lag), orDash(p.ConsumerID))
			}
			t.flush()
			continue
		}
		t = newTable(stdout, "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
		for _, p := range g.Partitions {
			t.row(p.Topic, p.Partition, dash(p.Current), dash(p.LogEnd), dash(p.Lag), orDash(p.ConsumerID), orDash(p.Host), orDash(p.ClientID))
		}
		t.flush()
	}
	return failed(bad, "group descriptions")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// offsetSpec is where a seek or a consume starts: start, end, an offset, so many
// records before the end, or the first record at or after a time.
type offsetSpec struct {
	kind   string // "start", "end", "offset", "fromEnd", "time"
	offset int64  // the offset, or for fromEnd how many records before the end
	millis int64
}

// parseOffsetSpec reads start|beginning|earliest, end|latest, a non-negative offset,
// -N (N records before each partition's end, as kcat's -o -N), @MILLIS or a time in
// RFC 3339.
func parseOffsetSpec(s string) (offsetSpec, error) {
	switch strings.ToLower(s) {
	case "start", "beginning", "earliest", "oldest":
		return offsetSpec{kind: "start"}, nil
	case "end", "latest", "newest":
		return offsetSpec{kind: "end"}, nil
	}
	if ms, ok := strings.CutPrefix(s, "@"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n < 0 {
			return offsetSpec{}, usageError{fmt.Sprintf("time %q: want @UNIX_MILLISECONDS", s)}
		}
		return offsetSpec{kind: "time", millis: n}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			if n == math.MinInt64 {
				return offsetSpec{}, usageError{fmt.Sprintf("offset %d: out of range", n)}
			}
			return offsetSpec{kind: "fromEnd", offset: -n}, nil
		}
		return offsetSpec{kind: "offset", offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return offsetSpec{kind: "time", millis: t.UnixMilli()}, nil
	}
	return offsetSpec{}, usageError{fmt.Sprintf("%q: want start, end, an offset, -N (N before the end), @UNIX_MILLISECONDS or an RFC 3339 time", s)}
}

// resolve lists, for each partition of topics, the offset spec names.
func (o offsetSpec) resolve(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	switch o.kind {
	case "start":
		return adm.ListStartOffsets(ctx, topics...)
	case "end":
		return adm.ListEndOffsets(ctx, topics...)
	case "time":
		return adm.ListOffsetsAfterMilli(ctx, o.millis, topics...)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var starts kadm.ListedOffsets
	if o.kind == "fromEnd" {
		if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
			return nil, err
		}
	}
	for t, ps := range ends {
		for p, lo := range ps {
			if o.kind == "fromEnd" {
				// Before the start is the start.
				first, _ := starts.Lookup(t, p)
				lo.Offset = max(lo.Offset-o.offset, first.Offset)
			} else {
				lo.Offset = min(o.offset, lo.Offset) // past the end is the end
			}
			ps[p] = lo
		}
	}
	return ends, nil
}

func groupSeek(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" GROUP --to start|end|OFFSET|-N|TIME [--topic TOPIC]...\n", stderr)
	to := fs.String("to", "", "start, end, an offset, -N (N before the end), @UNIX_MILLISECONDS or an RFC 3339 time")
	var topics keyValues
	fs.Var(&topics, "topic", "a topic to move (repeatable; default: every topic the group has offsets for)")
	names, err := kf.parse(fs, args, 1, 1, "group name")
	if err != nil {
		return err
	}
	if *to == "" {
		return usageError{"--to is required"}
	}
	spec, err := parseOffsetSpec(*to)
	if err != nil {
		return err
	}
	group := names[0]
	ctx, adm, done, err := kf.connect(3)
	if err != nil {
		return err
	}
	defer done()
	sg, share := shareGroupsOf(ctx, adm, []string{group})[group]
	if share && len(sg.Members) > 0 {
		return fmt.Errorf("share group %s has %d members (state %s): stop its consumers first", group, len(sg.Members), sg.GroupState)
	}
	if !share {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		if d, ok := dg[group]; ok && d.Err == nil && len(d.Members) > 0 {
			return fmt.Errorf("group %s has %d members (state %s): stop its consumers first", group, len(d.Members), d.State)
		}
	}
	list := []string(topics)
	if len(list) == 0 && share {
		offs, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			return err
		}
		for t := range offs[group].Offsets {
			list = append(list, t)
		}
		slices.Sort(list)
		if len(list) == 0 {
			return errors.New("the share group has no state: name the topics with --topic")
		}
	}
	if len(list) == 0 {
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for t := range committed {
			list = append(list, t)
		}
		slices.Sort(list)
		if len(list) == 0 {
			return errors.New("the group has no committed offsets: name the topics with --topic")
		}
	}
	listed, err := spec.resolve(ctx, adm.Client, list)
	if err != nil {
		return err
	}
	if err := listed.Error(); err != nil {
		return err
	}
	offsets := listed.Offsets()
	var partErr func(topic string, p int32) error
	if share {
		resp, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
		if err != nil {
			return err
		}
		partErr = func(topic string, p int32) error { e, _ := resp.Lookup(topic, p); return e }
	} else {
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		if err != nil {
			return err
		}
		partErr = func(topic string, p int32) error {
			if or, ok := resp.Lookup(topic, p); ok {
				return or.Err
			}
			return nil
		}
	}
	type row struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Error     string `json:"error,omitempty"`
	}
	var rows []row
	bad := 0
	for _, o := range offsets.Sorted() {
		r := row{Topic: o.Topic, Partition: o.Partition, Offset: o.At}
		if err := partErr(o.Topic, o.Partition); err != nil {
			r.Error = errString(err)
			bad++
		}
		rows = append(rows, r)
	}
	if kf.json {
		if err := printJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		t := newTable(stdout, "TOPIC", "PARTITION", "NEW-OFFSET", "STATUS")
		for _, r := range rows {
			t.row(r.Topic, r.Partition, r.Offset, orOK(r.Error))
		}
		t.flush()
	}
	return failed(bad, "offset commits")
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func groupDelete(prog string, args []string, stdout, stderr io.Writer) error {
	return deleteNamed(prog, args, stdout, stderr, "group", "GROUP", "group deletions",
		func(ctx context.Context, adm *adminConn, names []string) (kadm.DeleteGroupResponses, error) {
			return adm.DeleteGroups(ctx, names...)
		}, func(r kadm.DeleteGroupResponse) (string, error) { return r.ErrMessage, r.Err })
}

// shareGroupsOf returns those of names that are share groups (KIP-932), described.
// A broker without share groups, or an error, gives none.
func shareGroupsOf(ctx context.Context, adm *adminConn, names []string) map[string]kadm.DescribedShareGroup {
	out := map[string]kadm.DescribedShareGroup{}
	if len(names) == 0 {
		return out
	}
	ds, err := adm.DescribeShareGroups(ctx, names...)
	if err != nil && ds == nil {
		return out
	}
	for name, d := range ds {
		if d.Err == nil {
			out[name] = d
		}
	}
	return out
}
