package kernel

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unsupportedVersionResponse answers a request whose version kmsg can decode but no
// module claims, for the APIs where Kafka answers UNSUPPORTED_VERSION instead of closing
// the connection (Produce v0-v2: old message formats, removed by KIP-896). It returns nil
// for every other API, and the connection is closed.
func unsupportedVersionResponse(req kmsg.Request) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.Acks == 0 {
			return nil
		}
		resp := kmsg.NewPtrProduceResponse()
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.UnsupportedVersion.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	return nil
}
