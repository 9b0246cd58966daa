package authztest

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/kernel"
)

// check is one authorization question: an operation on a resource. A check with Name
// "*" stands for "some resource of the type" (AuthorizeByResourceType).
type check struct {
	Op   kernel.Operation
	Type kernel.ResourceType
	Name string
}

func (c check) String() string {
	return fmt.Sprintf("%s on %s %q", opName(c.Op), resName(c.Type), c.Name)
}

func opName(op kernel.Operation) string {
	switch op {
	case kernel.OpRead:
		return "Read"
	case kernel.OpWrite:
		return "Write"
	case kernel.OpCreate:
		return "Create"
	case kernel.OpDelete:
		return "Delete"
	case kernel.OpAlter:
		return "Alter"
	case kernel.OpDescribe:
		return "Describe"
	case kernel.OpClusterAction:
		return "ClusterAction"
	case kernel.OpDescribeConfigs:
		return "DescribeConfigs"
	case kernel.OpAlterConfigs:
		return "AlterConfigs"
	case kernel.OpIdempotentWrite:
		return "IdempotentWrite"
	}
	return fmt.Sprintf("op%d", op)
}

func resName(t kernel.ResourceType) string {
	switch t {
	case kernel.ResTopic:
		return "topic"
	case kernel.ResGroup:
		return "group"
	case kernel.ResCluster:
		return "cluster"
	case kernel.ResTransactionalID:
		return "transactional id"
	}
	return fmt.Sprintf("resource%d", t)
}

// Shorthands for the checks rows name.
func topic(op kernel.Operation, name string) check { return check{op, kernel.ResTopic, name} }
func group(op kernel.Operation, name string) check { return check{op, kernel.ResGroup, name} }
func txnID(op kernel.Operation, name string) check { return check{op, kernel.ResTransactionalID, name} }
func cluster(op kernel.Operation) check {
	return check{op, kernel.ResCluster, kernel.ClusterResourceName}
}

// asked is one recorded question with who asked it.
type asked struct {
	check
	principal kernel.Principal
	host      string
}

// recorder is the test auth module ("auth.recorder") and its Authorizer: it allows
// everything but the checks in deny, and records every question.
type recorder struct {
	mu    sync.Mutex
	deny  map[check]bool
	asked []asked
}

// set replaces the deny set and forgets what was asked.
func (a *recorder) set(deny ...check) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deny = map[check]bool{}
	for _, c := range deny {
		a.deny[c] = true
	}
	a.asked = nil
}

// questions returns what was asked since the last set.
func (a *recorder) questions() []asked {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]asked(nil), a.asked...)
}

// Authorize allows all but the denied checks.
func (a *recorder) Authorize(_ context.Context, p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	c := check{op, r.Type, r.Name}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, asked{c, p, host})
	return !a.deny[c]
}

// AuthorizeByResourceType answers "op on some resource of typ": denied when the row
// denies check{op, typ, "*"}.
func (a *recorder) AuthorizeByResourceType(_ context.Context, p kernel.Principal, host string, op kernel.Operation, typ kernel.ResourceType) bool {
	c := check{op, typ, "*"}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, asked{c, p, host})
	return !a.deny[c]
}

// info registers a as the module "auth.recorder" (one broker per recorder).
func (a *recorder) info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: "auth.recorder", New: func() kernel.Module { return a }}
}

var _ kernel.Authorizer = (*recorder)(nil)
