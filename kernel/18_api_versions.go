// ApiVersions: v0-v5. Built from the handlers modules claimed, so the broker never
// advertises an API it does not implement. v3+ carries the feature levels
// (seam_features.go): the modules' supported features, and the cluster's finalized
// levels with the metadata image's version as their epoch (it grows with every change,
// as Kafka's metadata offset does, and clients keep the map of the highest epoch they
// saw). As Kafka (KAFKA-17011), v3 leaves out supported features whose minimum level is
// 0, which clients before v4 misread; ZkMigrationReady is always false. v5 (KIP-1242):
// a client that names the cluster and broker it means to reach (both or neither:
// one alone is INVALID_REQUEST) is told REBOOTSTRAP_REQUIRED, with no keys, when this
// broker is another (a stale address after a restart moved brokers around); a broker
// that has not learned its cluster id yet cannot tell and answers as usual.

package kernel

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsClaim is the one key the kernel serves itself.
func (k *Kernel) apiVersionsClaim() Claim {
	return Claim{Key: kmsg.ApiVersions, Min: 0, Max: 5, Handler: Typed(k.apiVersions)}
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
	if req.Version >= 5 {
		if code := k.misrouted(r); code != 0 {
			resp.ErrorCode = code
			return Reply(resp), nil
		}
	}
	resp.ApiKeys = k.apiKeys()
	if req.Version >= 3 {
		k.addFeatures(resp, req.Version)
	}
	if req.Version >= 3 && (r.ClientSoftwareName == "" || r.ClientSoftwareVersion == "") {
		// Kafka validates these (KIP-511); empty is INVALID_REQUEST.
		resp.ErrorCode = kerr.InvalidRequest.Code
	} else if req.Version >= 3 && req.Conn != nil {
		req.Conn.ClientSoftwareName = truncate(r.ClientSoftwareName, MaxClientSoftwareLen)
		req.Conn.ClientSoftwareVersion = truncate(r.ClientSoftwareVersion, MaxClientSoftwareLen)
	}
	return Reply(resp), nil
}

// misrouted checks a v5 request's cluster and node ids against this broker's.
func (k *Kernel) misrouted(r *kmsg.ApiVersionsRequest) int16 {
	if (r.ClusterID == nil) != (r.NodeID < 0) {
		return kerr.InvalidRequest.Code
	}
	if r.ClusterID == nil {
		return 0 // bootstrapping: the client does not know yet
	}
	if r.NodeID != k.cfg.NodeID {
		return kerr.RebootstrapRequired.Code
	}
	if k.meta != nil {
		if im := k.meta.Image(); im != nil && im.ClusterID != "" && im.ClusterID != *r.ClusterID {
			return kerr.RebootstrapRequired.Code
		}
	}
	return 0
}

// MaxClientSoftwareLen bounds the client software name and version a connection keeps.
const MaxClientSoftwareLen = 128

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// addFeatures fills the feature fields of a v3+ response.
func (k *Kernel) addFeatures(resp *kmsg.ApiVersionsResponse, version int16) {
	for _, f := range k.features {
		if version < 4 && f.Min == 0 {
			continue
		}
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.Name, f.Min, f.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
	}
	resp.FinalizedFeaturesEpoch = -1
	if k.meta == nil {
		return
	}
	im := k.meta.Image()
	if im == nil || len(im.Features) == 0 {
		return
	}
	resp.FinalizedFeaturesEpoch = int64(im.Version)
	names := make([]string, 0, len(im.Features))
	for name := range im.Features {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name = name
		ff.MinVersionLevel, ff.MaxVersionLevel = im.Features[name], im.Features[name]
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// apiVersionsFallback is the v0 answer to an ApiVersions version we don't know.
func (k *Kernel) apiVersionsFallback() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = k.apiKeys()
	return resp
}
