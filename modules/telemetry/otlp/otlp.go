// Package otlp decodes the OTLP metrics (MetricsData, protobuf) clients push with
// KIP-714's PushTelemetry into flat data points: a metric name, the point's
// attributes and a value. It has no other dependency than protobuf, so its fuzz target
// runs fast.
package otlp

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// ErrPayload: a payload that is not OTLP MetricsData.
var ErrPayload = errors.New("telemetry: not OTLP metrics")

// Point is one decoded data point: the metric's name, the point's attributes (sorted
// "k=v" joined by commas, at most MaxAttrsLen bytes) and its value.
type Point struct {
	Metric, Attrs string
	Value         float64
}

// MaxAttrsLen bounds a point's attributes; longer ones are cut.
const MaxAttrsLen = 256

// Decode decodes an OTLP MetricsData payload into its gauge and sum points
// (histograms and summaries export their count and sum as two points, name.count and
// name.sum). At most maxPoints are returned; more reports truncated.
func Decode(b []byte, maxPoints int) (pts []Point, truncated bool, err error) {
	var md metricspb.MetricsData
	if err := proto.Unmarshal(b, &md); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	add := func(name string, attrs []*commonpb.KeyValue, v float64) {
		if len(pts) >= maxPoints {
			truncated = true
			return
		}
		pts = append(pts, Point{Metric: name, Attrs: attrString(attrs), Value: v})
	}
	num := func(name string, dps []*metricspb.NumberDataPoint) {
		for _, dp := range dps {
			switch v := dp.GetValue().(type) {
			case *metricspb.NumberDataPoint_AsDouble:
				add(name, dp.GetAttributes(), v.AsDouble)
			case *metricspb.NumberDataPoint_AsInt:
				add(name, dp.GetAttributes(), float64(v.AsInt))
			}
		}
	}
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				name := m.GetName()
				if name == "" {
					continue
				}
				switch d := m.GetData().(type) {
				case *metricspb.Metric_Gauge:
					num(name, d.Gauge.GetDataPoints())
				case *metricspb.Metric_Sum:
					num(name, d.Sum.GetDataPoints())
				case *metricspb.Metric_Histogram:
					for _, dp := range d.Histogram.GetDataPoints() {
						add(name+".count", dp.GetAttributes(), float64(dp.GetCount()))
						add(name+".sum", dp.GetAttributes(), dp.GetSum())
					}
				case *metricspb.Metric_Summary:
					for _, dp := range d.Summary.GetDataPoints() {
						add(name+".count", dp.GetAttributes(), float64(dp.GetCount()))
						add(name+".sum", dp.GetAttributes(), dp.GetSum())
					}
				}
			}
		}
	}
	return pts, truncated, nil
}

// attrString renders attributes as sorted k=v pairs joined by commas, cut at
// MaxAttrsLen bytes.
func attrString(kvs []*commonpb.KeyValue) string {
	if len(kvs) == 0 {
		return ""
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = anyString(kv.GetValue())
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		if b.Len() > MaxAttrsLen {
			return b.String()[:MaxAttrsLen]
		}
	}
	return b.String()
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	return ""
}
