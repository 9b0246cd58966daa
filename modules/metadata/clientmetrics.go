package metadata

import (
	"context"
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/clientmetrics"
	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// Client metrics subscriptions (the CLIENT_METRICS config resource, KIP-714) are kept
// as extension records of namespace clientmetrics.Namespace, as group configs are:
// key the subscription name, value a JSON object of its configs. A subscription with
// no config left has no key. As Kafka: DESCRIBE_CONFIGS and ALTER_CONFIGS on the
// cluster.

// sourceClientMetrics is CLIENT_METRICS_CONFIG (7), the source of a set value.
const sourceClientMetrics = kconfig.Source(kmsg.ConfigSourceClientMetricsConfig)

func clientMetricsConfigs(im *kernel.Image, name string) map[string]string {
	cfg, err := clientmetrics.Decode(im.Extension(clientmetrics.Namespace, name))
	if err != nil {
		return map[string]string{}
	}
	return cfg
}

func checkSubscriptionName(name string) error {
	switch {
	case name == "":
		return opErr(kerr.InvalidRequest, "client metrics subscription name must not be empty")
	case len(name) > image.MaxExtensionNameLen:
		return opErr(kerr.InvalidRequest, "client metrics subscription name of %d bytes: at most %d", len(name), image.MaxExtensionNameLen)
	}
	return nil
}

// describeClientMetrics returns every config of subscription name with its value and
// source (an unknown subscription has the defaults, as in Kafka).
func describeClientMetrics(ctx context.Context, req *kernel.Request, im *kernel.Image, name string) ([]kconfig.Entry, error) {
	if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
		return nil, opErr(kerr.ClusterAuthorizationFailed, "")
	}
	if err := checkSubscriptionName(name); err != nil {
		return nil, err
	}
	set := clientMetricsConfigs(im, name)
	var out []kconfig.Entry
	for _, n := range clientmetrics.Names() {
		typ := kconfig.TypeList
		if n == clientmetrics.ConfigInterval {
			typ = kconfig.TypeInt
		}
		e := kconfig.Entry{Name: n, Type: typ, Doc: clientmetrics.Doc(n), Source: kconfig.SourceDefault, Value: strPtr(clientmetrics.Default(n))}
		if v, ok := set[n]; ok {
			e.Value, e.Source = strPtr(v), sourceClientMetrics
			e.Synonyms = append(e.Synonyms, kconfig.Synonym{Name: n, Value: strPtr(v), Source: sourceClientMetrics})
		}
		out = append(out, e)
	}
	return out, nil
}

// planClientMetricsEdit validates changes to a subscription and returns the extension
// record that stores the result.
func planClientMetricsEdit(ctx context.Context, req *kernel.Request, im *kernel.Image, name string, ops []configOp, replace bool) (image.Record, error) {
	if !req.Allowed(ctx, kernel.OpAlterConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
		return nil, opErr(kerr.ClusterAuthorizationFailed, "")
	}
	if err := checkSubscriptionName(name); err != nil {
		return nil, err
	}
	after := map[string]string{}
	if !replace {
		after = maps.Clone(clientMetricsConfigs(im, name))
	}
	for _, o := range ops {
		if !clientmetrics.Known(o.name) {
			return nil, opErr(kerr.InvalidConfig, "Unknown client metrics config name: %s", o.name)
		}
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			v, err := clientmetrics.Validate(o.name, *o.value)
			if err != nil {
				return nil, clientMetricsErr(err)
			}
			after[o.name] = v
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(after, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if o.name == clientmetrics.ConfigInterval {
				return nil, opErr(kerr.InvalidConfig, "config %s is not a list; APPEND and SUBTRACT apply to lists only", o.name)
			}
			v, err := clientmetrics.Validate(o.name, editList(after[o.name], *o.value, o.op == kmsg.IncrementalAlterConfigOpAppend))
			if err != nil {
				return nil, clientMetricsErr(err)
			}
			after[o.name] = v
		default:
			return nil, opErr(kerr.InvalidRequest, "unknown operation %d for config %s", o.op, o.name)
		}
	}
	return configsRecord(clientmetrics.Namespace, name, after)
}

// clientMetricsErr is INVALID_CONFIG with the validation's message.
func clientMetricsErr(err error) error {
	return opErr(kerr.InvalidConfig, "%s", strings.TrimPrefix(err.Error(), clientmetrics.ErrInvalid.Error()+": "))
}
