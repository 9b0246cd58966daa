package otlp

import (
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

func attr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// samplePayload is an OTLP MetricsData with a gauge, a sum, a histogram and a
// summary, as a client would push them.
func samplePayload(t testing.TB) []byte {
	t.Helper()
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{
		{Name: "org.apache.kafka.consumer.fetch.manager.records.lag", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{
			{Attributes: []*commonpb.KeyValue{attr("topic", "t"), attr("partition", "0")}, Value: &metricspb.NumberDataPoint_AsInt{AsInt: 42}},
		}}}},
		{Name: "org.apache.kafka.producer.record.retry.total", Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: []*metricspb.NumberDataPoint{
			{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 3.5}},
		}}}},
		{Name: "latency", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{DataPoints: []*metricspb.HistogramDataPoint{
			{Count: 7, Sum: proto.Float64(70)},
		}}}},
		{Name: "", Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{}}}, // no name: skipped
	}}}}}}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeMetrics(t *testing.T) {
	pts, truncated, err := Decode(samplePayload(t), 100)
	if err != nil || truncated {
		t.Fatalf("decode: %v (truncated %v)", err, truncated)
	}
	want := []Point{
		{"org.apache.kafka.consumer.fetch.manager.records.lag", "partition=0,topic=t", 42},
		{"org.apache.kafka.producer.record.retry.total", "", 3.5},
		{"latency.count", "", 7},
		{"latency.sum", "", 70},
	}
	if len(pts) != len(want) {
		t.Fatalf("points %+v, want %+v", pts, want)
	}
	for i := range want {
		if pts[i] != want[i] {
			t.Errorf("point %d: %+v, want %+v", i, pts[i], want[i])
		}
	}
	if pts, truncated, _ := Decode(samplePayload(t), 2); len(pts) != 2 || !truncated {
		t.Errorf("with room for 2: %d points, truncated %v", len(pts), truncated)
	}
	if _, _, err := Decode([]byte{0xff, 0xff}, 10); err == nil {
		t.Error("garbage decoded")
	}
}

// FuzzDecode: any payload decodes or fails, within its point bound, never
// panicking.
func FuzzDecode(f *testing.F) {
	f.Add(samplePayload(f))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		pts, _, err := Decode(b, 50)
		if err == nil && len(pts) > 50 {
			t.Fatalf("%d points past the bound", len(pts))
		}
		for _, p := range pts {
			if len(p.Attrs) > MaxAttrsLen {
				t.Fatalf("attributes of %d bytes", len(p.Attrs))
			}
		}
	})
}
