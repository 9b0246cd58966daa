package kernel

import "context"

// Principal is who a connection acts as. Before authentication it is ANONYMOUS.
type Principal struct {
	Type string // "User"
	Name string
}

// Anonymous is the principal of an unauthenticated connection.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// String is "User:alice".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// Operation is a Kafka ACL operation (values as in the protocol's ACLOperation).
type Operation int8

// Operations, with Kafka's wire values.
const (
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
)

// ResourceType is a Kafka ACL resource type (wire values).
type ResourceType int8

// Resource types, with Kafka's wire values.
const (
	ResTopic           ResourceType = 2
	ResGroup           ResourceType = 3
	ResCluster         ResourceType = 4
	ResTransactionalID ResourceType = 5
)

// Resource is what an operation acts on. The cluster resource is named "kafka-cluster".
type Resource struct {
	Type ResourceType
	Name string
}

// ClusterResourceName is the name of the one cluster resource.
const ClusterResourceName = "kafka-cluster"

// Authorizer decides whether a principal may perform an operation on a resource. The
// auth module provides it; until then auth.none allows everything.
type Authorizer interface {
	Authorize(ctx context.Context, p Principal, op Operation, r Resource) bool
}

// AllowAll is the authorizer used when no auth module is configured.
type AllowAll struct{}

// Authorize allows everything.
func (AllowAll) Authorize(context.Context, Principal, Operation, Resource) bool { return true }
