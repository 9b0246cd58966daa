package kernel

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestMetrics are the per-API request families, labelled by Kafka's API name:
//
//	sluice_requests_by_api_total{api,api_key}   requests decoded and dispatched
//	sluice_request_duration_seconds{api}        from the whole frame read to the
//	                                            response written (Kafka's TotalTimeMs)
//	sluice_request_queue_seconds{api}           from the frame read to its handler's
//	                                            start (Kafka's RequestQueueTimeMs)
//
// A handler slot holds its API's children (apiMetrics), resolved once at claim time,
// so the request path costs one counter increment and two histogram observations.
type requestMetrics struct {
	count           *prometheus.CounterVec
	duration, queue *prometheus.HistogramVec
}

// requestBuckets span a quick metadata answer (100 µs) to a long-polling fetch or a
// slow acks=all produce (tens of seconds).
var requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func newRequestMetrics(reg prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		count: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_requests_by_api_total",
			Help: "Requests by API (Kafka's name and key)."}, []string{"api", "api_key"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_request_duration_seconds",
			Help: "Time from a request's frame read whole to its response written, by API (Kafka's TotalTimeMs).", Buckets: requestBuckets}, []string{"api"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_request_queue_seconds",
			Help: "Time a request waited between its frame read and its handler's start, by API (Kafka's RequestQueueTimeMs).", Buckets: requestBuckets}, []string{"api"}),
	}
	reg.MustRegister(m.count, m.duration, m.queue)
	return m
}

// apiMetrics are one API's children of requestMetrics.
type apiMetrics struct {
	count           prometheus.Counter
	duration, queue prometheus.Observer
}

func (m *requestMetrics) forKey(key int16) apiMetrics {
	name := kmsg.NameForKey(key)
	return apiMetrics{
		count:    m.count.WithLabelValues(name, strconv.Itoa(int(key))),
		duration: m.duration.WithLabelValues(name),
		queue:    m.queue.WithLabelValues(name),
	}
}

// observeDone records a request's total time, read at readAt and answered now.
func (a apiMetrics) observeDone(readAt time.Time) { a.duration.Observe(time.Since(readAt).Seconds()) }
