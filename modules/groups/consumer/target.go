package consumer

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// regexEntry is one distinct regex subscription of the group.
type regexEntry struct {
	re       *regexp.Regexp // anchored: Kafka matches whole names
	refs     int            // members subscribed with it
	matched  []string       // sorted topic names, internal topics excluded
	resolved bool
}

// topicMeta is what the group last saw of one subscribed topic.
type topicMeta struct {
	id         assignor.TopicID
	partitions int32
}

// compileRegex validates a subscription regex (RE2 syntax, as Kafka's RE2J)
// and returns it anchored at both ends.
func (g *Group) compileRegex(s string) (*regexp.Regexp, error) {
	if e := g.regexes[s]; e != nil {
		return e.re, nil
	}
	if _, err := regexp.Compile(s); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + s + ")$")
}

// setNames replaces m's explicit subscription, keeping nameRefs in step.
func (g *Group) setNames(m *member, names []string) {
	for _, n := range m.names {
		if g.nameRefs[n]--; g.nameRefs[n] <= 0 {
			delete(g.nameRefs, n)
		}
	}
	m.names = names
	for _, n := range names {
		g.nameRefs[n]++
	}
}

// setRegex replaces m's regex subscription; re is its compiled form (nil
// when regex is "" or already known).
func (g *Group) setRegex(m *member, regex string, re ...*regexp.Regexp) {
	if m.regex != "" {
		if e := g.regexes[m.regex]; e != nil {
			if e.refs--; e.refs <= 0 {
				delete(g.regexes, m.regex)
			}
		}
	}
	m.regex = regex
	if regex == "" {
		return
	}
	e := g.regexes[regex]
	if e == nil {
		e = &regexEntry{}
		if len(re) > 0 && re[0] != nil {
			e.re = re[0]
		} else {
			e.re, _ = g.compileRegex(regex)
		}
		g.regexes[regex] = e
	}
	e.refs++
}

// refreshRegexes resolves new regexes now and all of them again every
// RegexRefreshInterval. It reports whether a regex resolved before now
// matches other topics (a topic matched only by a regex and deleted is
// seen here, not by metaChanged).
func (g *Group) refreshRegexes(topics TopicView, now time.Time) (changed bool) {
	if len(g.regexes) == 0 {
		return false
	}
	due := g.cfg.RegexRefreshInterval < 0 || !now.Before(g.regexAt.Add(g.cfg.RegexRefreshInterval))
	if !due {
		for _, e := range g.regexes {
			if !e.resolved {
				due = true
				break
			}
		}
	}
	if !due {
		return false
	}
	names := topics.TopicNames()
	for _, e := range g.regexes {
		var matched []string
		if e.re != nil {
			for _, n := range names {
				if e.re.MatchString(n) {
					matched = append(matched, n)
				}
			}
		}
		slices.Sort(matched)
		matched = slices.Compact(matched)
		if e.resolved && !slices.Equal(matched, e.matched) {
			changed = true
		}
		e.matched, e.resolved = matched, true
	}
	g.regexAt = now
	return changed
}

// memberTopics is m's resolved subscription: explicit names and regex
// matches, sorted and unique.
func (g *Group) memberTopics(m *member) []string {
	out := slices.Clone(m.names)
	if e := g.regexes[m.regex]; m.regex != "" && e != nil {
		out = append(out, e.matched...)
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// currentMeta looks up every topic the group subscribes to; topics that do
// not exist are absent.
func (g *Group) currentMeta(topics TopicView) map[string]topicMeta {
	cur := make(map[string]topicMeta, len(g.nameRefs))
	look := func(n string) {
		if _, done := cur[n]; done {
			return
		}
		if id, parts, ok := topics.TopicByName(n); ok && parts >= 0 {
			cur[n] = topicMeta{id, parts}
		}
	}
	for n := range g.nameRefs {
		look(n)
	}
	for _, e := range g.regexes {
		for _, n := range e.matched {
			look(n)
		}
	}
	return cur
}

// metaChanged reports whether a subscribed topic appeared, disappeared or
// changed (id or partition count) since g.meta was taken. Topics no longer
// subscribed do not count: their removal came with a membership or
// subscription change that bumped the epoch already.
func (g *Group) metaChanged(cur map[string]topicMeta) bool {
	for n, m := range cur {
		if old, ok := g.meta[n]; !ok || old != m {
			return true
		}
	}
	for n := range g.nameRefs {
		if _, now := cur[n]; !now {
			if _, before := g.meta[n]; before {
				return true
			}
		}
	}
	for _, e := range g.regexes {
		for _, n := range e.matched {
			if _, now := cur[n]; !now {
				if _, before := g.meta[n]; before {
					return true
				}
			}
		}
	}
	return false
}

// Why an assignor was chosen, as AssignorChoice and Config.OnAssignorChosen say it.
const (
	WhyGroupConfig = "group config sluice.consumer.assignor"
	WhyRequested   = "requested by members"
	WhyDefault     = "default (first configured assignor)"
)

// chooseAssignor returns the assignor that computes the group's target, and why.
// Precedence: the group's configured assignor (GroupAssignors, the group config
// sluice.consumer.assignor) when it names one of Config.Assignors, so an operator's
// choice holds whatever the clients name; else the one most members ask for in
// ServerAssignor (ties go to the one configured first); else Config.Assignors[0].
func (g *Group) chooseAssignor(topics TopicView) (assignor.Assignor, string) {
	if ga, ok := topics.(GroupAssignors); ok {
		if name := ga.GroupAssignor(g.id); name != "" {
			if a := g.assignorNamed(name); a != nil {
				return a, WhyGroupConfig
			}
		}
	}
	count := map[string]int{}
	for _, m := range g.members {
		if m.serverAssignor != "" {
			count[m.serverAssignor]++
		}
	}
	best, bestN := g.cfg.Assignors[0], 0
	for _, a := range g.cfg.Assignors {
		if n := count[a.Name()]; n > bestN {
			best, bestN = a, n
		}
	}
	if bestN > 0 {
		return best, WhyRequested
	}
	return best, WhyDefault
}

func (g *Group) assignorNamed(name string) assignor.Assignor {
	for _, a := range g.cfg.Assignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

// computeTarget runs the assignor for the current group epoch. On failure
// the previous target stays and the error is kept for LastAssignorError.
func (g *Group) computeTarget(ctx context.Context, topics TopicView, cur map[string]topicMeta) {
	a, why := g.chooseAssignor(topics)
	if a.Name() != g.chosenBy || why != g.chosenWhy {
		g.chosenBy, g.chosenWhy = a.Name(), why
		if g.cfg.OnAssignorChosen != nil {
			g.cfg.OnAssignorChosen(g.id, a.Name(), why)
		}
	}
	stats, _ := topics.(TopicStats)
	if su, ok := a.(StatsUser); !ok || !su.UsesPartitionStats() {
		stats = nil // built-ins ignore end offsets and lag: keep them cheap
	}
	racks, _ := topics.(TopicRacks)
	if ru, ok := a.(RackUser); !ok || !ru.UsesPartitionRacks() {
		racks = nil // e.g. range, which ignores them: don't look them up
	}
	in := assignor.Input{Topics: make(map[assignor.TopicID]assignor.Topic, len(cur))}
	for n, t := range cur {
		at := assignor.Topic{ID: t.id, Name: n, Partitions: t.partitions}
		if racks != nil {
			if rs, ok := racks.PartitionRacks(t.id, t.partitions); ok && len(rs) == int(t.partitions) {
				at.PartitionRacks = rs
			}
		}
		if stats != nil {
			if ends, lag, ok := stats.PartitionStats(g.id, t.id, t.partitions); ok &&
				len(ends) == int(t.partitions) && len(lag) == int(t.partitions) {
				at.PartitionEndOffsets, at.PartitionLag = ends, lag
			}
		}
		in.Topics[t.id] = at
	}
	ms := g.sortedMembers()
	in.Members = make([]assignor.Member, 0, len(ms))
	for _, m := range ms {
		in.Members = append(in.Members, assignor.Member{
			ID:         m.id,
			InstanceID: m.instanceID,
			Rack:       m.rack,
			Topics:     g.memberTopics(m),
			Current:    g.target[m.id],
		})
	}
	out, err := callAssignor(ctx, a, in)
	if err == nil {
		err = assignor.Check(in, out)
	}
	if err != nil {
		g.assignErr = fmt.Errorf("assignor %q at group epoch %d: %w", a.Name(), g.groupEpoch, err)
		return
	}
	target := make(assignor.Assignment, len(ms))
	for _, m := range ms {
		target[m.id] = cloneTPs(out[m.id])
	}
	g.target, g.targetEpoch, g.targetBy, g.targetWhy, g.assignErr = target, g.groupEpoch, a.Name(), why, nil
	g.targetDirty = true
}

// callAssignor runs a, turning a panic into an error: a broken assignor
// must not take the coordinator down.
func callAssignor(ctx context.Context, a assignor.Assignor, in assignor.Input) (out assignor.Assignment, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("assignor panicked: %v", r)
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return a.Assign(ctx, in)
}
