package kernel

import (
	"context"
	"time"
)

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

// Operations, with Kafka's wire values. OpUnknown, OpAny and OpAll appear only in ACL
// bindings and filters; handlers ask for the others.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
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
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// ResourceType is a Kafka ACL resource type (wire values).
type ResourceType int8

// Resource types, with Kafka's wire values. ResUnknown and ResAny appear only in ACL
// filters.
const (
	ResUnknown         ResourceType = 0
	ResAny             ResourceType = 1
	ResTopic           ResourceType = 2
	ResGroup           ResourceType = 3
	ResCluster         ResourceType = 4
	ResTransactionalID ResourceType = 5
	ResDelegationToken ResourceType = 6
	ResUser            ResourceType = 7
)

// Resource is what an operation acts on. The cluster resource is named "kafka-cluster".
type Resource struct {
	Type ResourceType
	Name string
}

// ClusterResourceName is the name of the one cluster resource.
const ClusterResourceName = "kafka-cluster"

// Authorizer decides whether a principal connecting from host (an IP address, no port;
// "" when unknown) may perform an operation on a resource. The auth module provides it;
// without one, AllowAll. Authorize is called concurrently from every connection and on
// the hot path of every produce and fetch: it must not block on I/O.
type Authorizer interface {
	Authorize(ctx context.Context, p Principal, host string, op Operation, r Resource) bool
}

// ResourceTypeAuthorizer is an optional interface of an Authorizer: whether the
// principal may perform op on at least one resource of the type (Kafka's
// Authorizer.authorizeByResourceType: some allowing binding that no deny binding
// covers wholly). An idempotent InitProducerId asks it for Write on any topic.
type ResourceTypeAuthorizer interface {
	AuthorizeByResourceType(ctx context.Context, p Principal, host string, op Operation, typ ResourceType) bool
}

// AllowAll is the authorizer used when no auth module is configured.
type AllowAll struct{}

// Authorize allows everything.
func (AllowAll) Authorize(context.Context, Principal, string, Operation, Resource) bool { return true }

// Authenticator is an optional interface of the auth module: the SASL mechanisms it
// offers on SASL_PLAINTEXT and SASL_SSL listeners, and password checks for the admin
// HTTP API. The kernel owns the SASL state of each connection (SaslHandshake,
// SaslAuthenticate, v0 raw tokens, re-authentication); the module owns the mechanisms
// and the credentials.
type Authenticator interface {
	// Mechanisms lists the enabled SASL mechanisms (e.g. "SCRAM-SHA-256"), in the order
	// SaslHandshake advertises them.
	Mechanisms() []string
	// StartSASL begins one exchange of mechanism (one of Mechanisms) for the
	// connection c. An error means the mechanism is not enabled.
	StartSASL(mechanism string, c *ConnInfo) (SASLExchange, error)
	// CheckPassword verifies a user's password (HTTP Basic on the admin API) against
	// the same credentials SASL uses. It takes about the same time whether or not the
	// user exists and compares in constant time.
	CheckPassword(ctx context.Context, user, password string) (Principal, bool)
}

// SASLExchange is one SASL authentication on a connection. The kernel steps it with
// the client's messages (SaslAuthenticate's auth_bytes, or v0 raw tokens) from the
// connection's one processing goroutine: an exchange is never used concurrently.
type SASLExchange interface {
	// Step takes the client's next message and returns the server's reply. done
	// reports that the exchange succeeded (reply may still carry a final message,
	// SCRAM's server-final). An error means authentication failed: the kernel answers
	// SASL_AUTHENTICATION_FAILED with the error's text, after
	// connection.failed.authentication.delay.ms, and closes the connection. The text
	// must not tell whether the user exists.
	Step(ctx context.Context, msg []byte) (reply []byte, done bool, err error)
	// Principal is who authenticated; valid once Step returned done.
	Principal() Principal
	// Expiry is when the credential presented stops being valid (an OAUTHBEARER
	// token's exp), or the zero time. The kernel ends the session at the earlier of
	// this and connections.max.reauth.ms (KIP-368).
	Expiry() time.Time
}
