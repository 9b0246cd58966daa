package auth

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeAcls answers DescribeAcls: the bindings the filter matches, grouped by
// resource pattern. It needs Describe on the cluster.
func (a *aclState) describeAcls(ctx context.Context, req *kernel.Request, r *kmsg.DescribeACLsRequest) *kmsg.DescribeACLsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(kerr.ClusterAuthorizationFailed.Message)
		return resp
	}
	f := aclFilter{ResType: kernel.ResourceType(r.ResourceType), Pattern: int8(r.ResourcePatternType),
		Name: r.ResourceName, Principal: r.Principal, Host: r.Host,
		Op: kernel.Operation(r.Operation), Perm: int8(r.PermissionType)}
	if msg := f.validate(); msg != "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		return resp
	}
	matched := a.current().matching(&f)
	for i := 0; i < len(matched); {
		b := &matched[i].b
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType = kmsg.ACLResourceType(b.ResType)
		res.ResourceName = b.Name
		res.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern)
		for ; i < len(matched) && samePattern(&matched[i].b, b); i++ {
			e := &matched[i].b
			acl := kmsg.NewDescribeACLsResponseResourceACL()
			acl.Principal, acl.Host = e.Principal, e.Host
			acl.Operation, acl.PermissionType = kmsg.ACLOperation(e.Op), kmsg.ACLPermissionType(e.Perm)
			res.ACLs = append(res.ACLs, acl)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp
}

func samePattern(x, y *aclBinding) bool {
	return x.ResType == y.ResType && x.Pattern == y.Pattern && x.Name == y.Name
}

// matching returns the entries f matches, sorted by resource pattern and then entry.
func (idx *aclIndex) matching(f *aclFilter) []*aclEntry {
	var out []*aclEntry
	idx.each(func(e *aclEntry) {
		if f.matches(&e.b) {
			out = append(out, e)
		}
	})
	slices.SortFunc(out, func(x, y *aclEntry) int { return compareBindings(&x.b, &y.b) })
	return out
}

func compareBindings(x, y *aclBinding) int {
	return cmp.Or(cmp.Compare(x.ResType, y.ResType), cmp.Compare(x.Pattern, y.Pattern), cmp.Compare(x.Name, y.Name),
		cmp.Compare(x.Principal, y.Principal), cmp.Compare(x.Host, y.Host), cmp.Compare(x.Op, y.Op), cmp.Compare(x.Perm, y.Perm))
}

// createAcls answers CreateAcls: each valid creation is stored under its key (an
// identical binding is stored once); an invalid one gets INVALID_REQUEST. It needs
// Alter on the cluster.
func (a *aclState) createAcls(ctx context.Context, req *kernel.Request, r *kmsg.CreateACLsRequest) *kmsg.CreateACLsResponse {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		for i := range resp.Results {
			setCreateErr(&resp.Results[i], kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Message)
		}
		return resp
	}
	idx := a.current()
	var puts []aclPut
	byKey := map[string]int{} // key -> index in puts
	owner := make([]int, len(r.Creations))
	for i, c := range r.Creations {
		owner[i] = -1
		b := aclBinding{ResType: kernel.ResourceType(c.ResourceType), Pattern: int8(c.ResourcePatternType),
			Name: c.ResourceName, Principal: c.Principal, Host: c.Host,
			Op: kernel.Operation(c.Operation), Perm: int8(c.PermissionType)}
		if msg := b.validate(); msg != "" {
			setCreateErr(&resp.Results[i], kerr.InvalidRequest.Code, msg)
			continue
		}
		v := b.encode()
		key := aclKey(v)
		if idx.get(key) != nil {
			continue // already stored: success, as Kafka
		}
		j, ok := byKey[key]
		if !ok {
			j = len(puts)
			byKey[key] = j
			puts = append(puts, aclPut{key: key, value: v})
		}
		owner[i] = j
	}
	a.putAll(ctx, puts)
	for i, j := range owner {
		if j >= 0 && puts[j].err != nil {
			code, msg := putErrCode(puts[j].err)
			setCreateErr(&resp.Results[i], code, msg)
		}
	}
	a.logPutErrs("create ACLs", puts)
	a.current() // authorize sees the new bindings once this returns
	return resp
}

func setCreateErr(r *kmsg.CreateACLsResponseResult, code int16, msg string) {
	r.ErrorCode = code
	r.ErrorMessage = kmsg.StringPtr(msg)
}

// deleteAcls answers DeleteAcls: per filter, the bindings it matched and deleted. It
// needs Alter on the cluster.
func (a *aclState) deleteAcls(ctx context.Context, req *kernel.Request, r *kmsg.DeleteACLsRequest) *kmsg.DeleteACLsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = kerr.ClusterAuthorizationFailed.Code
			resp.Results[i].ErrorMessage = kmsg.StringPtr(kerr.ClusterAuthorizationFailed.Message)
		}
		return resp
	}
	idx := a.current()
	var puts []aclPut
	byKey := map[string]int{}
	matched := make([][]*aclEntry, len(r.Filters))
	for i, rf := range r.Filters {
		f := aclFilter{ResType: kernel.ResourceType(rf.ResourceType), Pattern: int8(rf.ResourcePatternType),
			Name: rf.ResourceName, Principal: rf.Principal, Host: rf.Host,
			Op: kernel.Operation(rf.Operation), Perm: int8(rf.PermissionType)}
		if msg := f.validate(); msg != "" {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			resp.Results[i].ErrorMessage = kmsg.StringPtr(msg)
			continue
		}
		matched[i] = idx.matching(&f)
		for _, e := range matched[i] {
			if _, ok := byKey[e.key]; !ok {
				byKey[e.key] = len(puts)
				puts = append(puts, aclPut{key: e.key}) // nil value: delete
			}
		}
	}
	a.putAll(ctx, puts)
	for i, es := range matched {
		for _, e := range es {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType = kmsg.ACLResourceType(e.b.ResType)
			m.ResourceName = e.b.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(e.b.Pattern)
			m.Principal, m.Host = e.b.Principal, e.b.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(e.b.Op), kmsg.ACLPermissionType(e.b.Perm)
			if err := puts[byKey[e.key]].err; err != nil {
				code, msg := putErrCode(err)
				m.ErrorCode, m.ErrorMessage = code, kmsg.StringPtr(msg)
			}
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	a.logPutErrs("delete ACLs", puts)
	a.current()
	return resp
}

// aclPut is one extension write (value nil: a delete) and its outcome.
type aclPut struct {
	key   string
	value []byte
	err   error
}

// putAll writes puts through the metadata log with at most maxInFlight writes in
// flight, so that raft commits them in batches rather than one fsync each.
func (a *aclState) putAll(ctx context.Context, puts []aclPut) {
	if len(puts) == 0 {
		return
	}
	workers := min(a.maxInFlight, len(puts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				puts[i].err = a.m.ext.PutExtension(ctx, aclNamespace, puts[i].key, puts[i].value)
			}
		}()
	}
	for i := range puts {
		next <- i
	}
	close(next)
	wg.Wait()
}

// putErrCode maps a failed write to a Kafka error code and message, at the response
// edge.
func putErrCode(err error) (int16, string) {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code, err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}

// logPutErrs logs the first failed write of a request (once per request, not per ACL).
func (a *aclState) logPutErrs(what string, puts []aclPut) {
	failed := 0
	var first error
	for _, p := range puts {
		if p.err != nil {
			if first == nil {
				first = p.err
			}
			failed++
		}
	}
	if first != nil {
		a.m.log.Warn(what+": writes failed", "failed", failed, "of", len(puts), "err", first)
	}
}
