// DeleteAcls: v0-3. Not implemented: nothing (v0 filters are LITERAL, as Kafka's).

package auth

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDeleteAcls is DeleteAcls' claim: auth.acl deletes the bindings each filter
// matches (aclState.deleteAcls), auth.none answers SECURITY_DISABLED.
func claimDeleteAcls(h kernel.Handler) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteACLs, Min: 0, Max: 3, Handler: h}
}
