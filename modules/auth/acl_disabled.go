package auth

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// Without an authorizer Kafka still serves the ACL APIs and answers each with
// SECURITY_DISABLED; auth.none does the same, so ApiVersions lists them either way.

const noAuthorizerMsg = "No Authorizer is configured on the broker (auth.none)"

// claimACLAPIsDisabled claims the ACL APIs for auth.none.
func claimACLAPIsDisabled(ctx kernel.Context) error {
	return kernel.ClaimAll(ctx,
		claimDescribeAcls(kernel.Replying(describeAclsDisabled)),
		claimCreateAcls(kernel.Replying(createAclsDisabled)),
		claimDeleteAcls(kernel.Replying(deleteAclsDisabled)))
}

func describeAclsDisabled(_ context.Context, _ *kernel.Request, r *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = kerr.SecurityDisabled.Code
	resp.ErrorMessage = kmsg.StringPtr(noAuthorizerMsg)
	return resp
}

func createAclsDisabled(_ context.Context, _ *kernel.Request, r *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = kerr.SecurityDisabled.Code
		res.ErrorMessage = kmsg.StringPtr(noAuthorizerMsg)
		resp.Results = append(resp.Results, res)
	}
	return resp
}

func deleteAclsDisabled(_ context.Context, _ *kernel.Request, r *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = kerr.SecurityDisabled.Code
		res.ErrorMessage = kmsg.StringPtr(noAuthorizerMsg)
		resp.Results = append(resp.Results, res)
	}
	return resp
}
