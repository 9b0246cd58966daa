package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// aclNamespace is the extension namespace of the ACL bindings: one key per binding.
const aclNamespace = "auth.acl"

// Pattern types, with Kafka's wire values (PatternType). Bindings are LITERAL or
// PREFIXED; ANY and MATCH appear only in filters.
const (
	patternUnknown  int8 = 0
	patternAny      int8 = 1
	patternMatch    int8 = 2
	patternLiteral  int8 = 3
	patternPrefixed int8 = 4
)

// Permission types, with Kafka's wire values (AclPermissionType). ANY appears only in
// filters.
const (
	permUnknown int8 = 0
	permAny     int8 = 1
	permDeny    int8 = 2
	permAllow   int8 = 3
)

// wildcardResource is the literal resource name that matches every name of its type.
const wildcardResource = "*"

// wildcardHost is the host that matches every host.
const wildcardHost = "*"

// maxACLField bounds each string of a binding (resource name, principal, host), in
// bytes: Kafka's protocol strings are at most 32767 bytes. Frozen with format v1.
const maxACLField = 32767

// aclFormatV1 is the version byte of the stored binding encoding (see doc.go).
const aclFormatV1 = 1

// errBadACL: stored bytes that are not a valid binding.
var errBadACL = errors.New("auth: invalid stored ACL")

// aclBinding is one ACL: who (principal, host) may or may not (permission) do what
// (operation) on which resources (type, pattern, name). It is Kafka's AclBinding.
type aclBinding struct {
	ResType   kernel.ResourceType
	Pattern   int8
	Name      string
	Principal string // "User:alice", or "User:*"
	Host      string // "*" or an IP address
	Op        kernel.Operation
	Perm      int8
}

// validResourceType reports whether t names a resource (not UNKNOWN or ANY).
func validResourceType(t kernel.ResourceType) bool {
	return t >= kernel.ResTopic && t <= kernel.ResUser
}

// validBindingOp reports whether op may appear in a binding (ALL or a real operation).
func validBindingOp(op kernel.Operation) bool {
	return op >= kernel.OpAll && op <= kernel.OpDescribeTokens
}

// parsePrincipal splits "Type:Name" (Kafka's SecurityUtils.parseKafkaPrincipal); both
// parts must be non-empty.
func parsePrincipal(s string) (kernel.Principal, bool) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return kernel.Principal{}, false
	}
	return kernel.Principal{Type: typ, Name: name}, true
}

// validate checks a binding as Kafka's CreateAcls does and returns the message of the
// INVALID_REQUEST it deserves, or "".
func (b *aclBinding) validate() string {
	switch {
	case !validResourceType(b.ResType):
		return fmt.Sprintf("Invalid resourceType %d", b.ResType)
	case b.Pattern != patternLiteral && b.Pattern != patternPrefixed:
		return fmt.Sprintf("Invalid patternType %d", b.Pattern)
	case !validBindingOp(b.Op):
		return fmt.Sprintf("Invalid operation %d", b.Op)
	case b.Perm != permAllow && b.Perm != permDeny:
		return fmt.Sprintf("Invalid permissionType %d", b.Perm)
	case b.Name == "":
		return "Resource name should not be empty"
	case b.ResType == kernel.ResCluster && b.Name != kernel.ClusterResourceName:
		return "The only valid name for the CLUSTER resource is " + kernel.ClusterResourceName
	case b.Host == "":
		return "Host should not be empty (use * for every host)"
	case len(b.Name) > maxACLField || len(b.Principal) > maxACLField || len(b.Host) > maxACLField:
		return fmt.Sprintf("Resource name, principal and host are at most %d bytes", maxACLField)
	}
	if _, ok := parsePrincipal(b.Principal); !ok {
		return fmt.Sprintf("Could not parse principal from `%s` (it must be Type:Name, e.g. User:alice)", b.Principal)
	}
	return ""
}

// encode is the binding's canonical encoding (format v1, see doc.go): equal bindings
// encode to equal bytes, so the key derived from it identifies the binding.
func (b *aclBinding) encode() []byte {
	out := make([]byte, 0, 5+3*binary.MaxVarintLen16+len(b.Name)+len(b.Principal)+len(b.Host))
	out = append(out, aclFormatV1, byte(b.ResType), byte(b.Pattern), byte(b.Op), byte(b.Perm))
	for _, s := range [...]string{b.Name, b.Principal, b.Host} {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	return out
}

// aclKey is the extension key of an encoded binding: the hex SHA-256 of its canonical
// encoding (64 bytes, within image.MaxExtensionNameLen).
func aclKey(enc []byte) string {
	sum := sha256.Sum256(enc)
	return hex.EncodeToString(sum[:])
}

// decodeACL decodes a stored binding. It never panics: anything but a complete, valid,
// canonical v1 encoding (unknown version, bad enum, overlong or truncated field,
// trailing bytes, a binding CreateAcls would refuse) is errBadACL. So a value that
// decodes is exactly encode() of what it decodes to.
func decodeACL(v []byte) (aclBinding, error) {
	var b aclBinding
	if len(v) < 5 {
		return b, fmt.Errorf("%w: %d bytes, too short", errBadACL, len(v))
	}
	if v[0] != aclFormatV1 {
		return b, fmt.Errorf("%w: format version %d", errBadACL, v[0])
	}
	b.ResType = kernel.ResourceType(int8(v[1]))
	b.Pattern = int8(v[2])
	b.Op = kernel.Operation(int8(v[3]))
	b.Perm = int8(v[4])
	rest := v[5:]
	var fields [3]string
	for i := range fields {
		n, w := binary.Uvarint(rest)
		if w <= 0 {
			return b, fmt.Errorf("%w: field %d: bad length", errBadACL, i)
		}
		rest = rest[w:]
		if n > maxACLField || n > uint64(len(rest)) {
			return b, fmt.Errorf("%w: field %d: length %d of %d bytes left", errBadACL, i, n, len(rest))
		}
		fields[i] = string(rest[:n])
		rest = rest[n:]
	}
	if len(rest) != 0 {
		return b, fmt.Errorf("%w: %d trailing bytes", errBadACL, len(rest))
	}
	b.Name, b.Principal, b.Host = fields[0], fields[1], fields[2]
	if msg := b.validate(); msg != "" {
		return b, fmt.Errorf("%w: %s", errBadACL, msg)
	}
	if !bytes.Equal(b.encode(), v) { // a non-minimal varint length
		return b, fmt.Errorf("%w: not the canonical encoding", errBadACL)
	}
	return b, nil
}

// aclFilter is Kafka's AclBindingFilter: nil strings and the ANY values match
// everything; pattern MATCH matches the bindings that apply to the named resource.
type aclFilter struct {
	ResType   kernel.ResourceType
	Pattern   int8
	Name      *string
	Principal *string
	Host      *string
	Op        kernel.Operation
	Perm      int8
}

// validate returns the message of the INVALID_REQUEST a filter with UNKNOWN (or out
// of range) elements deserves, or "".
func (f *aclFilter) validate() string {
	switch {
	case f.ResType < kernel.ResAny || f.ResType > kernel.ResUser:
		return fmt.Sprintf("Invalid resourceType %d in the filter", f.ResType)
	case f.Pattern < patternAny || f.Pattern > patternPrefixed:
		return fmt.Sprintf("Invalid patternType %d in the filter", f.Pattern)
	case f.Op < kernel.OpAny || f.Op > kernel.OpDescribeTokens:
		return fmt.Sprintf("Invalid operation %d in the filter", f.Op)
	case f.Perm < permAny || f.Perm > permAllow:
		return fmt.Sprintf("Invalid permissionType %d in the filter", f.Perm)
	}
	return ""
}

// matches is AclBindingFilter.matches: the resource pattern filter and the entry
// filter both match.
func (f *aclFilter) matches(b *aclBinding) bool {
	return f.matchesPattern(b) && f.matchesEntry(b)
}

// matchesPattern is ResourcePatternFilter.matches.
func (f *aclFilter) matchesPattern(b *aclBinding) bool {
	if f.ResType != kernel.ResAny && f.ResType != b.ResType {
		return false
	}
	if f.Pattern != patternAny && f.Pattern != patternMatch && f.Pattern != b.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.Pattern == patternAny || f.Pattern == b.Pattern {
		return name == b.Name
	}
	// MATCH: the bindings that apply to the resource named name.
	switch b.Pattern {
	case patternLiteral:
		return name == b.Name || b.Name == wildcardResource
	case patternPrefixed:
		return strings.HasPrefix(name, b.Name)
	}
	return false
}

// matchesEntry is AccessControlEntryFilter.matches.
func (f *aclFilter) matchesEntry(b *aclBinding) bool {
	switch {
	case f.Principal != nil && *f.Principal != b.Principal:
		return false
	case f.Host != nil && *f.Host != b.Host:
		return false
	case f.Op != kernel.OpAny && f.Op != b.Op:
		return false
	}
	return f.Perm == permAny || f.Perm == b.Perm
}
