// CreateAcls: v0-3. Not implemented: nothing (v0 creations are LITERAL, as Kafka's).

package auth

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimCreateAcls is CreateAcls' claim: auth.acl stores bindings
// (aclState.createAcls), auth.none answers SECURITY_DISABLED.
func claimCreateAcls(h kernel.Handler) kernel.Claim {
	return kernel.Claim{Key: kmsg.CreateACLs, Min: 0, Max: 3, Handler: h}
}
