package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/kernel"
)

type groupJSON struct {
	Group       string  `json:"group"`
	Type        string  `json:"type"`
	State       string  `json:"state"`
	Protocol    string  `json:"protocol"`
	Coordinator int32   `json:"coordinator"`
	Members     int     `json:"members"`
	Lag         int64   `json:"lag"`
	LagSeconds  float64 `json:"lag_seconds"`
	Error       string  `json:"error,omitempty"`
}

func (m *Module) groups(ctx context.Context, _ *http.Request) (any, error) {
	adm, _, err := m.client()
	if err != nil {
		return nil, err
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	var names, shares []string
	for _, lg := range listed.Sorted() {
		if lg.GroupType == "share" {
			shares = append(shares, lg.Group)
		} else {
			names = append(names, lg.Group)
		}
	}
	out := make([]groupJSON, 0, len(listed))
	if len(listed) == 0 {
		return out, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil && len(lags) == 0 && len(names) > 0 {
		return nil, err
	}
	shared := m.shareGroups(ctx, adm, shares)
	for _, lg := range listed.Sorted() {
		gj := groupJSON{Group: lg.Group, Type: lg.GroupType, State: lg.State, Coordinator: lg.Coordinator}
		if d, ok := shared[lg.Group]; ok {
			out = append(out, d.groupJSON)
			continue
		}
		if l, ok := lags[lg.Group]; ok {
			gj.State, gj.Protocol, gj.Members = l.State, l.Protocol, len(l.Members)
			if e := l.Error(); e != nil {
				gj.Error = e.Error()
			}
			rows := m.lagRows(ctx, l.Lag, time.Now(), false)
			gj.Lag, gj.LagSeconds = totals(rows)
		}
		if gj.Type == "" {
			gj.Type = "classic"
		}
		out = append(out, gj)
	}
	return out, nil
}

type memberJSON struct {
	ID         string   `json:"id"`
	InstanceID string   `json:"instance_id,omitempty"`
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Assigned   []string `json:"assigned"`
}

type lagRowJSON struct {
	Topic      string   `json:"topic"`
	Partition  int32    `json:"partition"`
	Committed  int64    `json:"committed"`
	End        int64    `json:"end"`
	Lag        int64    `json:"lag"`
	LagSeconds *float64 `json:"lag_seconds"` // null: no replica here to read a timestamp from
	Member     string   `json:"member,omitempty"`
	Error      string   `json:"error,omitempty"`
}

type groupDetailJSON struct {
	groupJSON
	Members    []memberJSON `json:"member_list"`
	Partitions []lagRowJSON `json:"partitions"`
	History    []lagSample  `json:"history"`
}

func (m *Module) group(ctx context.Context, r *http.Request) (any, error) {
	name := r.PathValue("group")
	adm, _, err := m.client()
	if err != nil {
		return nil, err
	}
	if d, ok := m.shareGroups(ctx, adm, []string{name})[name]; ok {
		d.History = m.lags.record(name, lagSample{AtMs: time.Now().UnixMilli(), Lag: d.Lag})
		return d, nil
	}
	lags, err := adm.Lag(ctx, name)
	if err != nil {
		return nil, err
	}
	l, ok := lags[name]
	if !ok || (l.State == "Dead" && len(l.Lag) == 0) {
		return nil, notFound{"no group " + name}
	}
	now := time.Now()
	out := groupDetailJSON{groupJSON: groupJSON{Group: name, Type: "classic", State: l.State, Protocol: l.Protocol, Coordinator: l.Coordinator.NodeID, Members: len(l.Members)},
		Members: []memberJSON{}}
	if listed, err := adm.ListGroups(ctx); err == nil && listed[name].GroupType != "" {
		out.Type = listed[name].GroupType
	}
	if e := l.Error(); e != nil {
		out.Error = e.Error()
	}
	for _, mb := range l.Members {
		mj := memberJSON{ID: mb.MemberID, ClientID: mb.ClientID, Host: mb.ClientHost, Assigned: []string{}}
		if mb.InstanceID != nil {
			mj.InstanceID = *mb.InstanceID
		}
		if ca, ok := mb.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				for _, p := range t.Partitions {
					mj.Assigned = append(mj.Assigned, t.Topic+"/"+itoa(p))
				}
			}
		}
		out.Members = append(out.Members, mj)
	}
	out.Partitions = m.lagRows(ctx, l.Lag, now, true)
	out.Lag, out.LagSeconds = totals(out.Partitions)
	out.History = m.lags.record(name, lagSample{AtMs: now.UnixMilli(), Lag: out.Lag, LagSeconds: out.LagSeconds})
	return out, nil
}

// lagRows turns kadm's lag into rows, sorted by topic and partition, with the time
// lag from this broker's replicas and, when remote is set, from the leaders of the
// partitions it holds no replica of (one fetch per leader: kernel.LeaderOffsets).
func (m *Module) lagRows(ctx context.Context, gl kadm.GroupLag, now time.Time, remote bool) []lagRowJSON {
	rows := []lagRowJSON{}
	ask := map[kernel.TopicPartition]int64{}
	for _, l := range gl.Sorted() {
		row := lagRowJSON{Topic: l.Topic, Partition: l.Partition, Committed: l.Commit.At, End: l.End.Offset, Lag: l.Lag}
		if l.Member != nil {
			row.Member = l.Member.MemberID
		}
		if l.Err != nil {
			row.Error = l.Err.Error()
		}
		if l.Commit.At < 0 { // nothing committed: kadm counts from the start
			row.Committed = -1
		}
		if m.offsets != nil {
			tp := kernel.TopicPartition{Topic: l.Topic, Partition: l.Partition}
			secs := 0.0
			known := l.Lag <= 0
			if l.Lag > 0 {
				at := max(l.Commit.At, 0)
				if ts, ok := m.offsets.BatchTimestamp(tp, at); ok {
					secs, known = max(float64(now.UnixMilli()-ts)/1000, 0), true
				} else if _, _, local := m.offsets.ReplicaOffsets(tp); !local {
					ask[tp] = at
				}
			}
			if known {
				row.LagSeconds = &secs
			}
		}
		rows = append(rows, row)
	}
	if remote && m.leaders != nil && len(ask) > 0 {
		times := m.leaders.LeaderBatchTimestamps(ctx, ask)
		for i := range rows {
			r := &rows[i]
			if ts, ok := times[kernel.TopicPartition{Topic: r.Topic, Partition: r.Partition}]; ok && r.LagSeconds == nil {
				secs := max(float64(now.UnixMilli()-ts)/1000, 0)
				r.LagSeconds = &secs
			}
		}
	}
	return rows
}

// totals sums the lag and takes the largest time lag of rows.
func totals(rows []lagRowJSON) (lag int64, secs float64) {
	for _, r := range rows {
		if r.Lag > 0 {
			lag += r.Lag
		}
		if r.LagSeconds != nil {
			secs = max(secs, *r.LagSeconds)
		}
	}
	return lag, secs
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// lagSample is one point of a group's lag chart.
type lagSample struct {
	AtMs       int64   `json:"at_ms"`
	Lag        int64   `json:"lag"`
	LagSeconds float64 `json:"lag_seconds"`
}

// watchWindow is how long after its page was last read a group keeps being sampled;
// maxWatched bounds the groups sampled in the background.
const (
	watchWindow = 10 * time.Minute
	maxWatched  = 50
)

// lagHistory keeps each watched group's recent lag samples.
type lagHistory struct {
	mu      sync.Mutex
	keep    int
	samples map[string][]lagSample
	watched map[string]time.Time // group -> when its page was last read
}

func newLagHistory(keep int) *lagHistory {
	return &lagHistory{keep: keep, samples: map[string][]lagSample{}, watched: map[string]time.Time{}}
}

// record adds s to group's samples, marks the group watched, and returns a copy of
// its samples.
func (h *lagHistory) record(group string, s lagSample) []lagSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watched[group]; !ok && len(h.watched) >= maxWatched {
		h.evictOldest()
	}
	h.watched[group] = time.UnixMilli(s.AtMs)
	return slices.Clone(h.add(group, s))
}

// add appends s; a sample less than a second after the last updates the last's
// figures instead (so a page read often does not crowd out the chart's span).
func (h *lagHistory) add(group string, s lagSample) []lagSample {
	ss := h.samples[group]
	if n := len(ss); n > 0 && s.AtMs-ss[n-1].AtMs < 1000 {
		ss[n-1].Lag, ss[n-1].LagSeconds = s.Lag, s.LagSeconds
	} else {
		ss = append(ss, s)
	}
	if len(ss) > h.keep {
		ss = slices.Delete(ss, 0, len(ss)-h.keep)
	}
	h.samples[group] = ss
	return ss
}

func (h *lagHistory) evictOldest() {
	oldest, when := "", time.Time{}
	for g, t := range h.watched {
		if oldest == "" || t.Before(when) {
			oldest, when = g, t
		}
	}
	delete(h.watched, oldest)
	delete(h.samples, oldest)
}

// due returns the groups watched within the window, forgetting the others.
func (h *lagHistory) due(now time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for g, t := range h.watched {
		if now.Sub(t) > watchWindow {
			delete(h.watched, g)
			delete(h.samples, g)
			continue
		}
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// sample adds a background sample (it does not renew the watch).
func (h *lagHistory) sample(group string, s lagSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watched[group]; ok {
		h.add(group, s)
	}
}

// sampleLoop samples the watched groups every LagSampleMs until Stop.
func (m *Module) sampleLoop() {
	t := time.NewTicker(time.Duration(m.LagSampleMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		groups := m.lags.due(time.Now())
		if len(groups) == 0 {
			continue
		}
		adm, _, err := m.client()
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		go func() { // Stop cancels the round
			select {
			case <-m.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		lags, err := adm.Lag(ctx, groups...)
		now := time.Now()
		if err == nil || len(lags) > 0 {
			for g, l := range lags {
				lag, secs := totals(m.lagRows(ctx, l.Lag, now, true))
				m.lags.sample(g, lagSample{AtMs: now.UnixMilli(), Lag: lag, LagSeconds: secs})
			}
		}
		cancel()
	}
}

// shareGroups describes those of names that are share groups (KIP-932): members with
// the partitions they were assigned, and per partition the share-partition start
// offset (as committed) and lag (records not yet acknowledged or archived).
func (m *Module) shareGroups(ctx context.Context, adm *kadm.Client, names []string) map[string]groupDetailJSON {
	out := map[string]groupDetailJSON{}
	if len(names) == 0 {
		return out
	}
	ds, err := adm.DescribeShareGroups(ctx, names...)
	if err != nil && ds == nil {
		return out
	}
	offs, _ := adm.DescribeShareGroupOffsets(ctx, names...)
	for name, d := range ds {
		if d.Err != nil {
			continue
		}
		g := groupDetailJSON{groupJSON: groupJSON{Group: name, Type: "share", State: d.GroupState, Protocol: d.Assignor,
			Coordinator: d.Coordinator.NodeID, Members: len(d.Members)}, Members: []memberJSON{}, Partitions: []lagRowJSON{}}
		holders := map[string][]string{}
		for _, mb := range d.Members {
			mj := memberJSON{ID: mb.MemberID, ClientID: mb.ClientID, Host: mb.ClientHost, Assigned: []string{}}
			for _, t := range mb.Assignment.Sorted() {
				for _, p := range t.Partitions {
					tp := t.Topic + "/" + itoa(p)
					mj.Assigned = append(mj.Assigned, tp)
					holders[tp] = append(holders[tp], mb.MemberID)
				}
			}
			g.Members = append(g.Members, mj)
		}
		if o, ok := offs[name]; ok && o.Err == nil {
			for _, so := range o.Offsets.Sorted() {
				row := lagRowJSON{Topic: so.Topic, Partition: so.Partition, Committed: so.StartOffset, End: -1, Lag: so.Lag}
				if hs := holders[so.Topic+"/"+itoa(so.Partition)]; len(hs) > 0 {
					row.Member = hs[0]
				}
				if so.Err != nil {
					row.Error = so.Err.Error()
				}
				g.Partitions = append(g.Partitions, row)
			}
		}
		g.Lag, _ = totals(g.Partitions)
		out[name] = g
	}
	return out
}
