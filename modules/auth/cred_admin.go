package auth

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeUserSCRAMs answers DescribeUserScramCredentials as Kafka: Describe on the
// cluster or a top-level CLUSTER_AUTHORIZATION_FAILED; no users named lists every user
// (bootstrap users too); a named user without credentials is RESOURCE_NOT_FOUND, a
// name given twice DUPLICATE_RESOURCE (one result per distinct name).
func (c *credState) describeUserSCRAMs(ctx context.Context, req *kernel.Request, b *kmsg.DescribeUserSCRAMCredentialsRequest) *kmsg.DescribeUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Describe on the cluster is required to describe SCRAM credentials")
		return resp
	}
	idx := c.current()
	byUser := idx.byUser()
	if len(b.Users) == 0 {
		users := make([]string, 0, len(byUser))
		for u := range byUser {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			resp.Results = append(resp.Results, describedUser(u, byUser[u]))
		}
		return resp
	}
	count := make(map[string]int, len(b.Users))
	for _, u := range b.Users {
		count[u.Name]++
	}
	for _, u := range b.Users {
		n := count[u.Name]
		if n == 0 {
			continue // answered already
		}
		count[u.Name] = 0
		switch creds := byUser[u.Name]; {
		case n > 1:
			resp.Results = append(resp.Results, userError(u.Name, kerr.DuplicateResource,
				"Cannot describe SCRAM credentials for the same user twice in a single request"))
		case len(creds) == 0:
			resp.Results = append(resp.Results, userError(u.Name, kerr.ResourceNotFound,
				"Attempt to describe a user credential that does not exist"))
		default:
			resp.Results = append(resp.Results, describedUser(u.Name, creds))
		}
	}
	return resp
}

// byUser groups the index's credentials by user, in scramMechs order.
func (idx *credIndex) byUser() map[string][]*credential {
	out := make(map[string][]*credential)
	for _, mech := range scramMechs {
		for k, cr := range idx.creds {
			if k.mech == mech {
				out[k.user] = append(out[k.user], cr)
			}
		}
	}
	return out
}

func describedUser(user string, creds []*credential) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	r.User = user
	for _, cr := range creds {
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism = int8(cr.mech)
		ci.Iterations = int32(cr.iterations)
		r.CredentialInfos = append(r.CredentialInfos, ci)
	}
	return r
}

func userError(user string, code *kerr.Error, msg string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	r.User, r.ErrorCode, r.ErrorMessage = user, code.Code, kmsg.StringPtr(msg)
	return r
}

// credChange is one validated change of an AlterUserScramCredentials request.
type credChange struct {
	user string
	mech scramMech
	cred *credential // nil deletes
}

// alterError is a per-user failure of AlterUserScramCredentials.
type alterError struct {
	code *kerr.Error
	msg  string
}

// alterUserSCRAMs answers AlterUserScramCredentials as Kafka: Alter on the cluster or
// CLUSTER_AUTHORIZATION_FAILED for every user; a user named twice (in deletions,
// upsertions or both, whatever the mechanisms) DUPLICATE_RESOURCE; then each user's
// change is validated (UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL,
// RESOURCE_NOT_FOUND for deleting what is not stored) and written through the metadata
// log. Every distinct user named gets one result, in the order first named. Unlike
// Kafka's controller the changes are not one atomic batch: each user's is its own log
// entry, applied in order.
func (c *credState) alterUserSCRAMs(ctx context.Context, req *kernel.Request, b *kmsg.AlterUserSCRAMCredentialsRequest) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	var order []string
	named := make(map[string]int)
	for _, d := range b.Deletions {
		if named[d.Name]++; named[d.Name] == 1 {
			order = append(order, d.Name)
		}
	}
	for _, u := range b.Upsertions {
		if named[u.Name]++; named[u.Name] == 1 {
			order = append(order, u.Name)
		}
	}
	result := func(user string, e *alterError) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		if e != nil {
			r.ErrorCode = e.code.Code
			if e.msg != "" {
				r.ErrorMessage = kmsg.StringPtr(e.msg)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		denied := &alterError{kerr.ClusterAuthorizationFailed, "Alter on the cluster is required to alter SCRAM credentials"}
		for _, u := range order {
			result(u, denied)
		}
		return resp
	}

	idx := c.current()
	errs := make(map[string]*alterError)
	changes := make(map[string]credChange)
	for _, d := range b.Deletions {
		if named[d.Name] > 1 {
			continue
		}
		ch, err := validateDeletion(idx, d)
		if err != nil {
			errs[d.Name] = err
			continue
		}
		changes[d.Name] = ch
	}
	for _, u := range b.Upsertions {
		if named[u.Name] > 1 {
			continue
		}
		ch, err := validateUpsertion(u)
		if err != nil {
			errs[u.Name] = err
			continue
		}
		changes[u.Name] = ch
	}
	for _, user := range order {
		if named[user] > 1 {
			result(user, &alterError{kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"})
			continue
		}
		if e := errs[user]; e != nil {
			result(user, e)
			continue
		}
		result(user, c.write(ctx, changes[user]))
	}
	return resp
}

// write puts one change through the metadata log.
func (c *credState) write(ctx context.Context, ch credChange) *alterError {
	var v []byte
	op := "delete"
	if ch.cred != nil {
		v, op = encodeCredential(ch.cred), "upsert"
	}
	if c.ext == nil {
		return &alterError{kerr.UnknownServerError, "no metadata log to store credentials in"}
	}
	if err := c.ext.PutExtension(ctx, CredentialNamespace, credKey(ch.mech, ch.user), v); err != nil {
		c.log.Warn("storing a SCRAM credential failed", "user", ch.user, "mechanism", ch.mech.String(), "op", op, "err", err)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return &alterError{kerr.RequestTimedOut, ""}
		}
		return &alterError{kerr.UnknownServerError, err.Error()}
	}
	c.log.Info("SCRAM credential changed", "user", ch.user, "mechanism", ch.mech.String(), "op", op)
	return nil
}

func validateDeletion(idx *credIndex, d kmsg.AlterUserSCRAMCredentialsRequestDeletion) (credChange, *alterError) {
	mech := scramMech(d.Mechanism)
	if err := validUser(d.Name); err != nil {
		return credChange{}, &alterError{kerr.UnacceptableCredential, err.Error()}
	}
	if !mech.valid() {
		return credChange{}, &alterError{kerr.UnsupportedSaslMechanism, fmt.Sprintf("Unknown SCRAM mechanism %d", d.Mechanism)}
	}
	switch cr := idx.creds[userMech{d.Name, mech}]; {
	case cr == nil:
		return credChange{}, &alterError{kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"}
	case cr.bootstrap:
		return credChange{}, &alterError{kerr.ResourceNotFound,
			fmt.Sprintf("the %s credential of %q is a bootstrap user's (module config), not stored; it cannot be deleted", mech, d.Name)}
	}
	return credChange{user: d.Name, mech: mech}, nil
}

func validateUpsertion(u kmsg.AlterUserSCRAMCredentialsRequestUpsertion) (credChange, *alterError) {
	mech := scramMech(u.Mechanism)
	unacceptable := func(format string, args ...any) (credChange, *alterError) {
		return credChange{}, &alterError{kerr.UnacceptableCredential, fmt.Sprintf(format, args...)}
	}
	if err := validUser(u.Name); err != nil {
		return unacceptable("%v", err)
	}
	if !mech.valid() {
		return credChange{}, &alterError{kerr.UnsupportedSaslMechanism, fmt.Sprintf("Unknown SCRAM mechanism %d", u.Mechanism)}
	}
	switch {
	case u.Iterations < MinIterations:
		return unacceptable("Too few iterations: %d, at least %d", u.Iterations, MinIterations)
	case u.Iterations > MaxIterations:
		return unacceptable("Too many iterations: %d, at most %d", u.Iterations, MaxIterations)
	case len(u.Salt) == 0:
		return unacceptable("empty salt")
	case len(u.Salt) > MaxSaltLen:
		return unacceptable("salt of %d bytes, at most %d", len(u.Salt), MaxSaltLen)
	case len(u.SaltedPassword) == 0:
		return unacceptable("empty salted password")
	case len(u.SaltedPassword) != mech.size():
		return unacceptable("salted password of %d bytes, %s needs %d", len(u.SaltedPassword), mech, mech.size())
	}
	return credChange{user: u.Name, mech: mech, cred: credentialFromSalted(mech, u.SaltedPassword, u.Salt, int(u.Iterations))}, nil
}
