// ApiVersions: v0-v4. Built from the handlers modules claimed, so the broker never
// advertises an API it does not implement. Not implemented: finalized/supported feature
// flags (v3+ tagged fields are left empty).

package kernel

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsClaim is the one key the kernel serves itself.
func (k *Kernel) apiVersionsClaim() Claim {
	return Claim{Key: kmsg.ApiVersions, Min: 0, Max: 4, Handler: Typed(k.apiVersions)}
}

func (k *Kernel) registerAPIVersions() error {
	c := k.apiVersionsClaim()
	return k.claim("kernel", c.Key.Int16(), c.Min, c.Max, c.Handler)
}

func (k *Kernel) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for key, s := range k.handlers {
		if s == nil {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(key), s.minV, s.maxV
		keys = append(keys, ak)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

func (k *Kernel) apiVersions(_ context.Context, req *Request, r *kmsg.ApiVersionsRequest) (Response, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = k.apiKeys()
	if req.Version >= 3 && (r.ClientSoftwareName == "" || r.ClientSoftwareVersion == "") {
		// Kafka validates these (KIP-511); empty is INVALID_REQUEST.
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	return Reply(resp), nil
}

// apiVersionsFallback is the v0 answer to an ApiVersions version we don't know.
func (k *Kernel) apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = k.apiKeys()
	return resp
}
