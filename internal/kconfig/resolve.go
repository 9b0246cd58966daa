package kconfig

import (
	"iter"
	"slices"
)

// layer is one map of broker config values and the source it stands for.
type layer struct {
	src Source
	m   map[string]string
}

func (l layer) dynamic() bool {
	return l.src == SourceDynamicBroker || l.src == SourceDynamicDefaultBroker
}

// brokerLayers returns the explicit broker layers, highest precedence first.
func brokerLayers(static, dynDefault, dynNode map[string]string) []layer {
	return []layer{
		{SourceDynamicBroker, dynNode},
		{SourceDynamicDefaultBroker, dynDefault},
		{SourceStaticBroker, static},
	}
}

// candidate is one usable value of a config found in one source.
type candidate struct {
	name string
	src  Source
	v    value // in the units of the config called name
	tv   value // converted to the topic config's units (topic candidates only)
}

// brokerCandidates yields the usable values of broker config d, highest precedence
// first, ending with its default when it has one. Invalid values are skipped, and
// dynamic layers are ignored for a read-only config.
func brokerCandidates(d *brokerDef, layers []layer) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		for _, l := range layers {
			if l.dynamic() && !d.dynamic {
				continue
			}
			raw, ok := l.m[d.name]
			if !ok {
				continue
			}
			if v, reason := d.parse(raw); reason == "" {
				if !yield(candidate{name: d.name, src: l.src, v: v}) {
					return
				}
			}
		}
		if v, ok := cat.defaults[&d.def]; ok {
			yield(candidate{name: d.name, src: SourceDefault, v: v})
		}
	}
}

// topicCandidates yields the usable values of topic config t, highest precedence
// first: the topic's override, then each broker synonym in order, each from every
// broker layer and then from its default. The first one is the effective value.
func topicCandidates(t *topicDef, overrides map[string]string, layers []layer) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		if raw, ok := overrides[t.name]; ok {
			if v, reason := t.parse(raw); reason == "" {
				if !yield(candidate{name: t.name, src: SourceDynamicTopic, v: v, tv: v}) {
					return
				}
			}
		}
		for _, s := range t.synonyms {
			for c := range brokerCandidates(cat.brokerBy[s.name], layers) {
				c.tv = s.toTopic(c.v)
				if t.check != nil && t.check(c.tv) != "" {
					continue // out of the topic config's range once converted
				}
				if !yield(c) {
					return
				}
			}
		}
	}
}

// first returns the first candidate of seq.
func first(seq iter.Seq[candidate]) (candidate, bool) {
	for c := range seq {
		return c, true
	}
	return candidate{}, false
}

// topicValue returns the effective value of t and its source.
func topicValue(t *topicDef, overrides map[string]string, layers []layer) (value, Source) {
	if c, ok := first(topicCandidates(t, overrides, layers)); ok {
		return c.tv, c.src
	}
	return cat.defaults[&t.def], SourceDefault // every topic config has a default
}

// effectiveTopic returns the effective value of every topic config by name.
func effectiveTopic(overrides map[string]string, layers []layer) map[string]value {
	out := make(map[string]value, len(cat.topics))
	for _, t := range cat.topics {
		out[t.name], _ = topicValue(t, overrides, layers)
	}
	return out
}

// effectiveBroker returns the effective value of every broker config that has one.
func effectiveBroker(layers []layer) map[string]value {
	out := make(map[string]value, len(cat.brokers))
	for _, b := range cat.brokers {
		if c, ok := first(brokerCandidates(b, layers)); ok {
			out[b.name] = c.v
		}
	}
	return out
}

// describedValue is how Describe shows v: nil for a sensitive config.
func describedValue(d *def, v value) *string {
	if d.sensitive() {
		return nil
	}
	s := v.s
	return &s
}

func synonymsOf(d *def, cands []candidate) []Synonym {
	out := make([]Synonym, 0, len(cands))
	for _, c := range cands {
		out = append(out, Synonym{Name: c.name, Value: describedValue(d, c.v), Source: c.src})
	}
	return out
}

func describeTopic(overrides map[string]string, layers []layer) []Entry {
	out := make([]Entry, 0, len(cat.topics))
	for _, t := range cat.topics {
		cands := slices.Collect(topicCandidates(t, overrides, layers))
		v, src := cat.defaults[&t.def], SourceDefault
		if len(cands) > 0 {
			v, src = cands[0].tv, cands[0].src
		}
		out = append(out, Entry{
			Name:      t.name,
			Value:     describedValue(&t.def, v),
			Sensitive: t.sensitive(),
			Source:    src,
			Type:      t.typ,
			Doc:       t.doc,
			Synonyms:  synonymsOf(&t.def, cands),
		})
	}
	return out
}

func describeBroker(layers []layer) []Entry {
	out := make([]Entry, 0, len(cat.brokers))
	for _, b := range cat.brokers {
		cands := slices.Collect(brokerCandidates(b, layers))
		e := Entry{
			Name:      b.name,
			ReadOnly:  !b.dynamic,
			Sensitive: b.sensitive(),
			Source:    SourceDefault,
			Type:      b.typ,
			Doc:       b.doc,
		}
		if len(cands) > 0 {
			e.Value = describedValue(&b.def, cands[0].v)
			e.Source = cands[0].src
		}
		for _, lower := range b.lower {
			cands = slices.AppendSeq(cands, brokerCandidates(cat.brokerBy[lower], layers))
		}
		e.Synonyms = synonymsOf(&b.def, cands)
		out = append(out, e)
	}
	return out
}
