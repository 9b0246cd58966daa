package auth

import (
	"bytes"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/kernel"
)

// aclState holds the ACL bindings and answers Authorize with Kafka's
// StandardAuthorizer semantics (see doc.go, "ACLs"). The bindings live in the metadata
// log (namespace aclNamespace); idx is an immutable index of them, rebuilt from an
// image whose namespace changed and swapped atomically, so authorize takes no lock.
type aclState struct {
	m            *Module
	superUsers   map[kernel.Principal]struct{} // super.users
	allowNoACL   bool                          // allow.everyone.if.no.acl.found
	idx          atomic.Pointer[aclIndex]
	buildMu      sync.Mutex // serializes index builds; never taken by authorize once idx is set
	builds       atomic.Uint64
	maxInFlight  int // concurrent PutExtension calls of one request
	warnedDecode atomic.Bool
}

// provision reads super.users and allow.everyone.if.no.acl.found (a bad value is a
// start error) and claims the ACL APIs.
func (a *aclState) provision(m *Module, ctx kernel.Context) error {
	a.m = m
	a.maxInFlight = 64
	var err error
	if a.superUsers, err = parseSuperUsers(m.broker.StaticConfigs["super.users"]); err != nil {
		return err
	}
	switch v := strings.TrimSpace(m.broker.StaticConfigs["allow.everyone.if.no.acl.found"]); {
	case v == "" || strings.EqualFold(v, "false"):
		a.allowNoACL = false
	case strings.EqualFold(v, "true"):
		a.allowNoACL = true
	default:
		return fmt.Errorf("auth: allow.everyone.if.no.acl.found: %q is not true or false", v)
	}
	return kernel.ClaimAll(ctx,
		claimDescribeAcls(kernel.Replying(a.describeAcls)),
		claimCreateAcls(kernel.Replying(a.createAcls)),
		claimDeleteAcls(kernel.Replying(a.deleteAcls)))
}

// parseSuperUsers parses super.users: principals "Type:Name" separated by semicolons.
func parseSuperUsers(v string) (map[kernel.Principal]struct{}, error) {
	out := map[kernel.Principal]struct{}{}
	for _, s := range strings.Split(v, ";") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, ok := parsePrincipal(s)
		if !ok {
			return nil, fmt.Errorf("auth: super.users: %q is not a principal (Type:Name, e.g. User:admin)", s)
		}
		out[p] = struct{}{}
	}
	return out, nil
}

// apply follows the metadata image. While a newer image is already published (and so
// queued for this subscriber) it skips the build: a burst of ACL writes costs one build
// per burst, not one per entry.
func (a *aclState) apply(im *kernel.Image) {
	if a.m == nil || im == nil {
		return
	}
	if latest := a.m.meta.Image(); latest != nil && latest.Version > im.Version {
		return
	}
	a.refresh(im)
}

// current returns an index at least as new as the metadata module's current image, so
// an ACL API reads its own writes.
func (a *aclState) current() *aclIndex {
	return a.refresh(a.m.meta.Image())
}

// index returns the index authorize reads: lock-free once the first one is built.
func (a *aclState) index() *aclIndex {
	if idx := a.idx.Load(); idx != nil {
		return idx
	}
	return a.current()
}

// refresh makes the index reflect im unless it already reflects im or a newer image,
// and returns the index in force.
func (a *aclState) refresh(im *kernel.Image) *aclIndex {
	a.buildMu.Lock()
	defer a.buildMu.Unlock()
	cur := a.idx.Load()
	if im == nil {
		if cur == nil {
			cur = buildACLIndex(nil, 0, nil, nil)
			a.idx.Store(cur)
		}
		return cur
	}
	if cur != nil && cur.version >= im.Version {
		return cur
	}
	ns := im.Extensions[aclNamespace]
	if cur != nil && sameMap(cur.ns, ns) {
		next := *cur
		next.version = im.Version
		a.idx.Store(&next)
		return &next
	}
	next := buildACLIndex(ns, im.Version, cur, a.badStored)
	a.idx.Store(next)
	a.builds.Add(1)
	return next
}

// badStored reports a stored value that does not decode (a newer format, or a bug):
// the binding is left out of the index. Logged once at Warn, then at Debug.
func (a *aclState) badStored(key string, err error) {
	if a.warnedDecode.CompareAndSwap(false, true) {
		a.m.log.Warn("skipping undecodable ACL", "key", key, "err", err)
		return
	}
	a.m.log.Debug("skipping undecodable ACL", "key", key, "err", err)
}

// sameMap reports whether two maps are the same map (not merely equal).
func sameMap(x, y map[string][]byte) bool {
	return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
}

// authorize is Kafka's StandardAuthorizer decision: a super user may do everything;
// else a matching DENY denies; else a matching ALLOW allows; else, when no binding at
// all applies to the resource, allow.everyone.if.no.acl.found decides; else deny.
func (a *aclState) authorize(p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	if len(a.superUsers) > 0 {
		if _, ok := a.superUsers[p]; ok {
			return true
		}
	}
	return a.index().decide(p, host, op, r, a.allowNoACL)
}

// aclEntry is one binding in the index, with what matching needs precomputed.
type aclEntry struct {
	key     string
	raw     []byte // the stored value
	b       aclBinding
	pType   string // the principal's type and name
	pName   string
	anyUser bool   // the principal is User:*, which matches every principal (Kafka's WILDCARD_KAFKA_PRINCIPAL)
	host    string // canonical: an IP address as net.IP.String prints it, or "*"
}

func newACLEntry(key string, raw []byte, b aclBinding) *aclEntry {
	p, _ := parsePrincipal(b.Principal) // decodeACL validated it
	e := &aclEntry{key: key, raw: raw, b: b, pType: p.Type, pName: p.Name, host: b.Host}
	e.anyUser = p.Type == "User" && p.Name == "*"
	if ip := net.ParseIP(b.Host); ip != nil {
		e.host = ip.String()
	}
	return e
}

// aclIndex is an immutable index of the bindings of one image: a base layer, rebuilt
// rarely, plus the bindings added since (delta) and the base keys deleted since
// (removed). A burst of writes then costs a small delta per image instead of a full
// rebuild; once delta and removed outgrow an eighth of the base, the next build is
// a full one.
type aclIndex struct {
	version uint64
	ns      map[string][]byte   // the namespace map it was built from
	base    *aclLayer           // never nil
	delta   *aclLayer           // nil when empty
	removed map[string]struct{} // keys of base entries no longer stored; nil when none
}

// aclLayer indexes a set of entries.
type aclLayer struct {
	entries map[string]*aclEntry // by extension key
	byType  [kernel.ResUser + 1]*typeIndex
}

// typeIndex holds the bindings of one resource type.
type typeIndex struct {
	literal    map[string][]*aclEntry // LITERAL bindings but "*", by name
	wildcard   []*aclEntry            // LITERAL "*"
	prefixed   map[string][]*aclEntry // PREFIXED bindings, by prefix
	prefixLens []int                  // the distinct lengths of the prefixes, ascending
}

// get returns the stored binding with that key, or nil.
func (idx *aclIndex) get(key string) *aclEntry {
	if idx.delta != nil {
		if e := idx.delta.entries[key]; e != nil {
			return e
		}
	}
	if _, gone := idx.removed[key]; gone {
		return nil
	}
	return idx.base.entries[key]
}

// each calls fn with every stored binding.
func (idx *aclIndex) each(fn func(*aclEntry)) {
	for key, e := range idx.base.entries {
		if _, gone := idx.removed[key]; !gone {
			fn(e)
		}
	}
	if idx.delta != nil {
		for _, e := range idx.delta.entries {
			fn(e)
		}
	}
}

// buildACLIndex indexes the namespace map ns, reusing prev's decoded entries whose
// stored value is unchanged. bad is told about values that do not decode.
func buildACLIndex(ns map[string][]byte, version uint64, prev *aclIndex, bad func(string, error)) *aclIndex {
	if prev == nil {
		return fullACLIndex(ns, version, nil, bad)
	}
	base := prev.base
	var added []*aclEntry
	inBase := 0
	for key, v := range ns {
		if e := base.entries[key]; e != nil && sameValue(e.raw, v) {
			inBase++
			continue
		}
		e := prev.reuse(key, v)
		if e == nil {
			if e = decodeEntry(key, v, bad); e == nil {
				continue
			}
		}
		added = append(added, e)
	}
	var removed map[string]struct{}
	if inBase < len(base.entries) {
		removed = map[string]struct{}{}
		for key, e := range base.entries {
			if v, ok := ns[key]; !ok || !sameValue(e.raw, v) {
				removed[key] = struct{}{}
			}
		}
	}
	if len(added)+len(removed) > len(base.entries)/8+64 {
		return fullACLIndex(ns, version, prev, bad)
	}
	idx := &aclIndex{version: version, ns: ns, base: base, removed: removed}
	if len(added) > 0 {
		idx.delta = newACLLayer(added)
	}
	return idx
}

// fullACLIndex indexes ns in one base layer.
func fullACLIndex(ns map[string][]byte, version uint64, prev *aclIndex, bad func(string, error)) *aclIndex {
	es := make([]*aclEntry, 0, len(ns))
	for key, v := range ns {
		e := prev.reuse(key, v)
		if e == nil {
			if e = decodeEntry(key, v, bad); e == nil {
				continue
			}
		}
		es = append(es, e)
	}
	return &aclIndex{version: version, ns: ns, base: newACLLayer(es)}
}

// reuse returns idx's entry for key if its stored value is v (idx may be nil).
func (idx *aclIndex) reuse(key string, v []byte) *aclEntry {
	if idx == nil {
		return nil
	}
	if e := idx.get(key); e != nil && sameValue(e.raw, v) {
		return e
	}
	return nil
}

// sameValue reports whether two stored values are equal. Images share unchanged
// values, so the pointers usually answer.
func sameValue(x, y []byte) bool {
	if len(x) != len(y) {
		return false
	}
	return len(x) == 0 || &x[0] == &y[0] || bytes.Equal(x, y)
}

func decodeEntry(key string, v []byte, bad func(string, error)) *aclEntry {
	b, err := decodeACL(v)
	if err != nil {
		if bad != nil {
			bad(key, err)
		}
		return nil
	}
	return newACLEntry(key, v, b)
}

func newACLLayer(es []*aclEntry) *aclLayer {
	l := &aclLayer{entries: make(map[string]*aclEntry, len(es))}
	for _, e := range es {
		l.entries[e.key] = e
		ti := l.byType[e.b.ResType]
		if ti == nil {
			ti = &typeIndex{literal: map[string][]*aclEntry{}, prefixed: map[string][]*aclEntry{}}
			l.byType[e.b.ResType] = ti
		}
		switch {
		case e.b.Pattern == patternPrefixed:
			ti.prefixed[e.b.Name] = append(ti.prefixed[e.b.Name], e)
		case e.b.Name == wildcardResource:
			ti.wildcard = append(ti.wildcard, e)
		default:
			ti.literal[e.b.Name] = append(ti.literal[e.b.Name], e)
		}
	}
	for _, ti := range l.byType {
		if ti == nil {
			continue
		}
		for prefix := range ti.prefixed {
			ti.prefixLens = append(ti.prefixLens, len(prefix))
		}
		slices.Sort(ti.prefixLens)
		ti.prefixLens = slices.Compact(ti.prefixLens)
	}
	return l
}

// decision accumulates the bindings that apply to one resource.
type decision struct {
	found bool // some binding applies to the resource (any principal, host, operation)
	allow bool // a matching ALLOW
	deny  bool // a matching DENY
}

// decide answers for a principal that is not a super user. In each layer it looks up
// the literal name, the wildcard, and each prefix length in use: never a scan of all
// bindings.
func (idx *aclIndex) decide(p kernel.Principal, host string, op kernel.Operation, r kernel.Resource, allowNoACL bool) bool {
	var d decision
	idx.base.check(&d, idx.removed, p, host, op, r)
	if idx.delta != nil && !d.deny {
		idx.delta.check(&d, nil, p, host, op, r)
	}
	switch {
	case d.deny:
		return false
	case d.allow:
		return true
	case !d.found:
		return allowNoACL
	}
	return false
}

func (l *aclLayer) check(d *decision, removed map[string]struct{}, p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) {
	if r.Type < 0 || int(r.Type) >= len(l.byType) || l.byType[r.Type] == nil {
		return
	}
	ti := l.byType[r.Type]
	d.check(ti.literal[r.Name], removed, p, host, op)
	d.check(ti.wildcard, removed, p, host, op)
	for _, n := range ti.prefixLens {
		if n > len(r.Name) || d.deny {
			break
		}
		d.check(ti.prefixed[r.Name[:n]], removed, p, host, op)
	}
}

func (d *decision) check(es []*aclEntry, removed map[string]struct{}, p kernel.Principal, host string, op kernel.Operation) {
	for _, e := range es {
		if removed != nil {
			if _, gone := removed[e.key]; gone {
				continue
			}
		}
		d.found = true
		if !e.anyUser && (e.pName != p.Name || e.pType != p.Type) {
			continue
		}
		if e.host != wildcardHost && e.host != host {
			continue
		}
		if !opMatches(e.b.Op, e.b.Perm, op) {
			continue
		}
		if e.b.Perm == permDeny {
			d.deny = true
			return
		}
		d.allow = true
	}
}

// opMatches reports whether a binding for operation bop with permission perm applies
// to a request for op: ALL applies to every operation; an ALLOW of Read, Write, Delete
// or Alter also allows Describe, and an ALLOW of AlterConfigs DescribeConfigs (a DENY
// denies only its own operation, or all).
func opMatches(bop kernel.Operation, perm int8, op kernel.Operation) bool {
	if bop == kernel.OpAll || bop == op {
		return true
	}
	if perm != permAllow {
		return false
	}
	switch op {
	case kernel.OpDescribe:
		return bop == kernel.OpRead || bop == kernel.OpWrite || bop == kernel.OpDelete || bop == kernel.OpAlter
	case kernel.OpDescribeConfigs:
		return bop == kernel.OpAlterConfigs
	}
	return false
}
