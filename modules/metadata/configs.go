package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// describeConfigsResp serves DescribeConfigs.
func (m *Module) describeConfigsResp(ctx context.Context, req *kernel.Request, r *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := kmsg.NewPtrDescribeConfigsResponse()
	resp.Version = r.Version
	im := m.node.hub.image()
	static := m.node.kctx.Broker().StaticConfigs
	for _, res := range r.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		entries, err := m.describeResource(ctx, req, im, static, res.ResourceType, res.ResourceName)
		if err != nil {
			rr.ErrorCode, rr.ErrorMessage = errCode(err)
			resp.Resources = append(resp.Resources, rr)
			continue
		}
		var only map[string]bool
		if res.ConfigNames != nil {
			only = make(map[string]bool, len(res.ConfigNames))
			for _, n := range res.ConfigNames {
				only[n] = true
			}
		}
		for _, e := range entries {
			if only != nil && !only[e.Name] {
				continue
			}
			rr.Configs = append(rr.Configs, describedConfig(e, r))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

// configTopic is the topic a config resource names, for describing (op
// OpDescribeConfigs) or altering (OpAlterConfigs) its configs, checked in Kafka's
// order: the principal may do op on it, the name is valid, the topic exists.
func configTopic(ctx context.Context, req *kernel.Request, im *kernel.Image, op kernel.Operation, name string) (*kernel.TopicImage, error) {
	if !req.Allowed(ctx, op, kernel.ResTopic, name) {
		return nil, opErr(kerr.TopicAuthorizationFailed, "")
	}
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	t := im.Topic(name)
	if t == nil {
		return nil, opErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return t, nil
}

// configBroker is the broker layer a config resource names (its node id, or "" for
// the cluster default), checked in Kafka's order: the principal may do op on the
// cluster, the name is this broker's id or empty.
func (m *Module) configBroker(ctx context.Context, req *kernel.Request, op kernel.Operation, name string) (string, error) {
	if !req.Allowed(ctx, op, kernel.ResCluster, kernel.ClusterResourceName) {
		return "", opErr(kerr.ClusterAuthorizationFailed, "")
	}
	return m.node.parseBrokerResource(name)
}

func (m *Module) describeResource(ctx context.Context, req *kernel.Request, im *kernel.Image, static map[string]string,
	typ kmsg.ConfigResourceType, name string,
) ([]kconfig.Entry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t, err := configTopic(ctx, req, im, kernel.OpDescribeConfigs, name)
		if err != nil {
			return nil, err
		}
		return m.node.describeTopicConfigs(im, t.Configs), nil
	case kmsg.ConfigResourceTypeBroker:
		key, err := m.configBroker(ctx, req, kernel.OpDescribeConfigs, name)
		if err != nil {
			return nil, err
		}
		if key == "" { // the cluster default: only what is set dynamically for all brokers
			var out []kconfig.Entry
			for _, e := range kconfig.DescribeBroker(nil, im.BrokerConfigs[""], nil) {
				if e.Source == kconfig.SourceDynamicDefaultBroker {
					out = append(out, e)
				}
			}
			return out, nil
		}
		return kconfig.DescribeBroker(static, im.BrokerConfigs[""], im.BrokerConfigs[key]), nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
			return nil, opErr(kerr.ClusterAuthorizationFailed, "")
		}
		if key, err := m.node.parseBrokerResource(name); err != nil || key == "" {
			return nil, opErr(kerr.InvalidRequest, "broker logger resource must name this broker (%d)", m.node.nodeID)
		}
		return nil, nil // no per-logger levels yet: an empty list
	case kmsg.ConfigResourceTypeGroupConfig:
		return m.describeGroupConfigs(ctx, req, im, static, name)
	case kmsg.ConfigResourceTypeClientMetrics:
		return describeClientMetrics(ctx, req, im, name)
	}
	return nil, opErr(kerr.InvalidRequest, "unsupported resource type %d", typ)
}

func describedConfig(e kconfig.Entry, r *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.ReadOnly, c.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Sensitive
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsDefault = e.Source == kconfig.SourceDefault
	if r.Version >= 1 && r.IncludeSynonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = s.Name, s.Value, kmsg.ConfigSource(s.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	if r.Version >= 3 {
		c.ConfigType = kmsg.ConfigType(e.Type)
		if r.IncludeDocumentation && e.Doc != "" {
			c.Documentation = strPtr(e.Doc)
		}
	}
	return c
}

// configEdit is one requested change to a resource's configs, after parsing.
type configEdit struct {
	typ  kmsg.ConfigResourceType
	name string
	rec  image.Record
}

// resourceKey identifies a config resource, to find duplicates in a request.
func resourceKey(typ kmsg.ConfigResourceType, name string) string {
	return fmt.Sprintf("%d/%s", typ, name)
}

// configOp is one config change of an (incremental) alter request.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// planConfigEdit validates changes to one resource and returns the record for them.
// replace: the request replaces every dynamic config of the resource (AlterConfigs).
func (m *Module) planConfigEdit(ctx context.Context, req *kernel.Request, im *kernel.Image,
	typ kmsg.ConfigResourceType, name string, ops []configOp, replace bool,
) (image.Record, error) {
	seen := map[string]bool{}
	for _, o := range ops {
		if seen[o.name] {
			return nil, opErr(kerr.InvalidRequest, "config %s appears more than once for the resource", o.name)
		}
		seen[o.name] = true
		if o.value == nil && o.op != kmsg.IncrementalAlterConfigOpDelete {
			return nil, opErr(kerr.InvalidRequest, "null value for config %s", o.name)
		}
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t, err := configTopic(ctx, req, im, kernel.OpAlterConfigs, name)
		if err != nil {
			return nil, err
		}
		change, after, err := m.applyOps(ops, replace, t.Configs, func(n string) (kconfig.Type, *string, bool) {
			typ, ok := kconfig.TopicConfigType(n)
			return typ, entryValue(m.node.describeTopicConfigs(im, t.Configs), n), ok
		})
		if err != nil {
			return nil, err
		}
		for n := range change.Set {
			if err := kconfig.ValidateTopic(n, change.Set[n]); err != nil {
				return nil, configErr(err)
			}
		}
		if err := kconfig.ValidateTopicConfigs(after, m.node.mergedBrokerConfigs(im)); err != nil {
			return nil, configErr(err)
		}
		return &image.AlterTopicConfigsRecord{Topic: t.Name, ID: t.ID, ConfigChange: change}, nil
	case kmsg.ConfigResourceTypeBroker:
		key, err := m.configBroker(ctx, req, kernel.OpAlterConfigs, name)
		if err != nil {
			return nil, err
		}
		static := m.node.kctx.Broker().StaticConfigs
		var node map[string]string // the node layer; none for the cluster default
		if key != "" {
			node = im.BrokerConfigs[key]
		}
		change, _, err := m.applyOps(ops, replace, im.BrokerConfigs[key], func(n string) (kconfig.Type, *string, bool) {
			typ, ok := kconfig.BrokerConfigType(n)
			return typ, entryValue(kconfig.DescribeBroker(static, im.BrokerConfigs[""], node), n), ok
		})
		if err != nil {
			return nil, err
		}
		for _, n := range slices.Sorted(maps.Keys(change.Set)) {
			if err := kconfig.ValidateBroker(n, change.Set[n]); err != nil {
				return nil, configErr(err)
			}
		}
		return &image.AlterBrokerConfigsRecord{Node: key, ConfigChange: change}, nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		// As Kafka: who may not alter the cluster's configs learns nothing more.
		if !req.Allowed(ctx, kernel.OpAlterConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
			return nil, opErr(kerr.ClusterAuthorizationFailed, "")
		}
		return nil, opErr(kerr.InvalidRequest, "altering broker logger levels is not supported")
	case kmsg.ConfigResourceTypeGroupConfig:
		return m.planGroupConfigEdit(ctx, req, im, name, ops, replace)
	case kmsg.ConfigResourceTypeClientMetrics:
		return planClientMetricsEdit(ctx, req, im, name, ops, replace)
	}
	return nil, opErr(kerr.InvalidRequest, "unsupported resource type %d", typ)
}

// entryValue returns the described value of config name, or nil.
func entryValue(entries []kconfig.Entry, name string) *string {
	for _, e := range entries {
		if e.Name == name {
			return e.Value
		}
	}
	return nil
}

// configErr maps a kconfig validation error to a response error.
func configErr(err error) error {
	switch {
	case errors.Is(err, kconfig.ErrReadOnly):
		return opErr(kerr.InvalidRequest, "%v", err)
	default:
		return opErr(kerr.InvalidConfig, "%v", err)
	}
}

// applyOps turns ops into a configChange against current, and returns the resulting
// map too. lookup gives a config's type, its effective value (for APPEND/SUBTRACT on an
// unset list) and whether the config is known.
func (m *Module) applyOps(ops []configOp, replace bool, current map[string]string,
	lookup func(string) (kconfig.Type, *string, bool),
) (image.ConfigChange, map[string]string, error) {
	change := image.ConfigChange{Replace: replace, Set: map[string]string{}}
	for _, o := range ops {
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			change.Set[o.name] = *o.value
		case kmsg.IncrementalAlterConfigOpDelete:
			if _, _, known := lookup(o.name); !known {
				return change, nil, opErr(kerr.InvalidConfig, "unknown config %s", o.name)
			}
			change.Delete = append(change.Delete, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			typ, eff, known := lookup(o.name)
			if !known {
				return change, nil, opErr(kerr.InvalidConfig, "unknown config %s", o.name)
			}
			if typ != kconfig.TypeList {
				return change, nil, opErr(kerr.InvalidConfig, "config %s is not a list; APPEND and SUBTRACT apply to lists only", o.name)
			}
			base, ok := current[o.name]
			if !ok && eff != nil {
				base = *eff
			}
			change.Set[o.name] = editList(base, *o.value, o.op == kmsg.IncrementalAlterConfigOpAppend)
		default:
			return change, nil, opErr(kerr.InvalidRequest, "unknown operation %d for config %s", o.op, o.name)
		}
	}
	slices.Sort(change.Delete)
	return change, change.ApplyTo(current), nil
}

// editList appends the items of v missing from list, or removes them from it. Lists are
// comma separated. It runs in time linear in the lengths (v comes from the client).
func editList(list, v string, add bool) string {
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	items := split(list)
	edits := split(v)
	if add {
		present := make(map[string]bool, len(items))
		for _, it := range items {
			present[it] = true
		}
		for _, it := range edits {
			if !present[it] {
				present[it] = true
				items = append(items, it)
			}
		}
		return strings.Join(items, ",")
	}
	// A multiset difference: each item of v removes one occurrence, the first.
	remove := make(map[string]int, len(edits))
	for _, it := range edits {
		remove[it]++
	}
	out := items[:0]
	for _, it := range items {
		if remove[it] > 0 {
			remove[it]--
			continue
		}
		out = append(out, it)
	}
	return strings.Join(out, ",")
}

// alterConfigs validates edits and proposes the valid ones (unless validateOnly).
// It returns one error per edit (nil: applied or valid).
func (m *Module) alterConfigs(ctx context.Context, edits []configEdit, errs []error, validateOnly bool) {
	if validateOnly {
		return
	}
	var recs []image.Record
	var at []int
	for i, e := range edits {
		if errs[i] == nil {
			recs = append(recs, e.rec)
			at = append(at, i)
		}
	}
	if len(recs) == 0 {
		return
	}
	_, perrs := m.node.proposeAll(ctx, recs)
	for j, i := range at {
		errs[i] = perrs[j]
	}
}

// alterResource is one resource of an AlterConfigs or IncrementalAlterConfigs request,
// normalised to operations (AlterConfigs is a full replacement: every entry is a SET).
type alterResource struct {
	typ  kmsg.ConfigResourceType
	name string
	ops  []configOp
}

// alterResources plans and applies the edits of either alter API. It answers each
// resource in request order, as AlterConfigs does; IncrementalAlterConfigs' answers
// have the same fields and convert.
func (m *Module) alterResources(ctx context.Context, req *kernel.Request, res []alterResource, replace, validateOnly bool) []kmsg.AlterConfigsResponseResource {
	// A group's (or a client metrics subscription's) configs are one extension value,
	// rewritten whole from the image: such edits run one at a time, each reading the
	// image its predecessor left.
	if !validateOnly && slices.ContainsFunc(res, func(r alterResource) bool {
		return r.typ == kmsg.ConfigResourceTypeGroupConfig || r.typ == kmsg.ConfigResourceTypeClientMetrics
	}) {
		m.groupConfigsMu.Lock()
		defer m.groupConfigsMu.Unlock()
	}
	im := m.node.hub.image()
	keys := make([]string, len(res))
	for i, r := range res {
		keys[i] = resourceKey(r.typ, r.name)
	}
	dups := counts(keys)
	edits := make([]configEdit, len(res))
	errs := make([]error, len(res))
	for i, r := range res {
		edits[i] = configEdit{typ: r.typ, name: r.name}
		if dups[keys[i]] > 1 {
			errs[i] = opErr(kerr.InvalidRequest, "resource appears more than once in the request")
			continue
		}
		edits[i].rec, errs[i] = m.planConfigEdit(ctx, req, im, r.typ, r.name, r.ops, replace)
	}
	m.alterConfigs(ctx, edits, errs, validateOnly)
	answers := make([]kmsg.AlterConfigsResponseResource, len(res))
	for i, r := range res {
		answers[i] = kmsg.NewAlterConfigsResponseResource()
		answers[i].ResourceType, answers[i].ResourceName = r.typ, r.name
		answers[i].ErrorCode, answers[i].ErrorMessage = errCode(errs[i])
	}
	return answers
}

// setOps reads AlterConfigs entries as operations: each one a SET.
func setOps(cs []kmsg.AlterConfigsRequestResourceConfig) []configOp {
	ops := make([]configOp, len(cs))
	for j, c := range cs {
		ops[j] = configOp{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value}
	}
	return ops
}

// alterConfigsResp serves AlterConfigs (full replacement of a resource's dynamic configs).
func (m *Module) alterConfigsResp(ctx context.Context, req *kernel.Request, r *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	res := make([]alterResource, len(r.Resources))
	for i, rr := range r.Resources {
		res[i] = alterResource{typ: rr.ResourceType, name: rr.ResourceName, ops: setOps(rr.Configs)}
	}
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.Version = r.Version
	resp.Resources = m.alterResources(ctx, req, res, true, r.ValidateOnly)
	return resp
}

// incrementalAlterConfigsResp serves IncrementalAlterConfigs.
func (m *Module) incrementalAlterConfigsResp(ctx context.Context, req *kernel.Request, r *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.Version = r.Version
	res := make([]alterResource, 0, len(r.Resources))
	for _, rr := range r.Resources {
		a := alterResource{typ: rr.ResourceType, name: rr.ResourceName}
		for _, c := range rr.Configs {
			a.ops = append(a.ops, configOp{name: c.Name, op: c.Op, value: c.Value})
		}
		res = append(res, a)
	}
	for _, a := range m.alterResources(ctx, req, res, false, r.ValidateOnly) {
		// The two APIs' resource answers have the same fields.
		resp.Resources = append(resp.Resources, kmsg.IncrementalAlterConfigsResponseResource(a))
	}
	return resp
}
