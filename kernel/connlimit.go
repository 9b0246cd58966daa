package kernel

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Connection limits, with Kafka's names and behaviour:
//
//	max.connections                                    broker-wide, every listener
//	listener.name.<l>.max.connections                  one listener (default: unlimited)
//	    at the limit the accept loop stops accepting until a connection closes; new
//	    clients wait in the kernel's backlog (Kafka blocks accept the same way)
//	max.connections.per.ip                             per client address, all listeners
//	max.connections.per.ip.overrides  "ip:n,ip:n"      per-address exceptions
//	    over the limit the new connection is closed at once
//	max.connection.creation.rate                       per listener, connections/s,
//	listener.name.<l>.max.connection.creation.rate     throttled by delaying accept
//
// Kafka's defaults (2147483647) mean no limit. Unlike Kafka, overrides name IP
// addresses only (no host names: resolving them would make startup depend on DNS), and
// the inter-broker listener gets no exemption from max.connections (Kafka lets it past
// the limit and closes another listener's least recently used connection instead).
//
// Invariant: total and each listener's count are the connections accepted and not yet
// closed, and never exceed their limits; byIP likewise per address. A slot is taken
// before Accept and given back if Accept fails or the connection is refused.
type connLimits struct {
	max         int64
	perIP       int64
	overrides   map[netip.Addr]int64
	unlimitedIP bool // perIP is the default and there are no overrides: no per-IP counting

	mu    sync.Mutex
	total int64
	byIP  map[netip.Addr]int64
	// changed wakes accept loops waiting for a slot when a connection closes.
	changed broadcast
}

// listenerLimits are one listener's own limits and state.
type listenerLimits struct {
	max   int64
	n     int64 // guarded by connLimits.mu
	rate  *rateLimiter
	waits int64 // accepts that had to wait (limit or rate), guarded by connLimits.mu
}

// kafkaUnlimited is Kafka's default for the connection limits: Int.MaxValue.
const kafkaUnlimited = math.MaxInt32

func newConnLimits(cfg *Config) (*connLimits, error) {
	maxConns, err := cfg.brokerInt("max.connections", kafkaUnlimited)
	if err != nil {
		return nil, err
	}
	perIP, err := cfg.brokerInt("max.connections.per.ip", kafkaUnlimited)
	if err != nil {
		return nil, err
	}
	if maxConns < 0 || perIP < 0 {
		return nil, fmt.Errorf("config: max.connections and max.connections.per.ip must be at least 0")
	}
	ov, err := ParseIPOverrides(cfg.Configs["max.connections.per.ip.overrides"])
	if err != nil {
		return nil, fmt.Errorf("config: max.connections.per.ip.overrides: %w", err)
	}
	if perIP == 0 && len(ov) == 0 {
		// Kafka's rule: a zero limit without overrides would refuse everyone.
		return nil, fmt.Errorf("config: max.connections.per.ip is 0 but max.connections.per.ip.overrides is empty: no client could connect")
	}
	return &connLimits{
		max: maxConns, perIP: perIP, overrides: ov,
		unlimitedIP: perIP >= kafkaUnlimited && len(ov) == 0,
		byIP:        map[netip.Addr]int64{},
	}, nil
}

// newListenerLimits reads listener.name.<name>.max.connections and the creation rate
// (listener's own, else max.connection.creation.rate). Kafka's listener prefix is the
// listener name in lower case; the name as written is accepted too.
func newListenerLimits(cfg *Config, name string) (*listenerLimits, error) {
	get := func(key string) (int64, error) {
		for _, p := range []string{"listener.name." + strings.ToLower(name) + ".", "listener.name." + name + "."} {
			if _, ok := cfg.Configs[p+key]; ok {
				return cfg.brokerInt(p+key, kafkaUnlimited)
			}
		}
		if key == "max.connections" {
			return kafkaUnlimited, nil // the broker-wide limit applies separately
		}
		return cfg.brokerInt(key, kafkaUnlimited)
	}
	maxConns, err := get("max.connections")
	if err != nil {
		return nil, err
	}
	rate, err := get("max.connection.creation.rate")
	if err != nil {
		return nil, err
	}
	if maxConns < 0 || rate < 0 {
		return nil, fmt.Errorf("config: listener %s: max.connections and max.connection.creation.rate must be at least 0", name)
	}
	ll := &listenerLimits{max: maxConns}
	if rate < kafkaUnlimited {
		ll.rate = newRateLimiter(float64(rate))
	}
	return ll, nil
}

// ParseIPOverrides parses max.connections.per.ip.overrides: comma-separated ip:count
// pairs ("127.0.0.1:200,::1:200"; the count follows the last colon, so IPv6 addresses
// need no brackets, though [::1]:200 is accepted too). Spaces around entries are
// ignored; an empty string is no overrides.
func ParseIPOverrides(s string) (map[netip.Addr]int64, error) {
	out := map[netip.Addr]int64{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 || i == len(e)-1 {
			return nil, fmt.Errorf("%q: want ip:count", e)
		}
		host, num := strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return nil, fmt.Errorf("%q: %q is not an IP address (host names are not supported)", e, host)
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: count %q is not a non-negative integer", e, num)
		}
		ip = ip.Unmap()
		if _, dup := out[ip]; dup {
			return nil, fmt.Errorf("%q: address listed twice", e)
		}
		out[ip] = n
	}
	return out, nil
}

// waitSlot waits until the broker and listener l are both under max.connections and
// the listener's creation rate allows one more, then takes a slot. It returns false
// once stop is closed. The accept loop calls it before Accept.
func (cl *connLimits) waitSlot(l *listenerLimits, stop <-chan struct{}, blocked func(reason string)) bool {
	if l.rate != nil {
		if d := l.rate.take(time.Now()); d > 0 {
			cl.mu.Lock()
			l.waits++
			cl.mu.Unlock()
			blocked("max.connection.creation.rate")
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return false
			}
		}
	}
	logged := false
	for {
		cl.mu.Lock()
		if cl.total < cl.max && l.n < l.max {
			cl.total++
			l.n++
			cl.mu.Unlock()
			return true
		}
		ch := cl.changed.wait()
		if !logged {
			l.waits++
		}
		cl.mu.Unlock()
		if !logged {
			logged = true
			blocked("max.connections")
		}
		select {
		case <-ch:
		case <-stop:
			return false
		}
	}
}

// putSlot gives back a slot taken by waitSlot.
func (cl *connLimits) putSlot(l *listenerLimits) {
	cl.mu.Lock()
	cl.total--
	l.n--
	cl.changed.wake()
	cl.mu.Unlock()
}

// limitFor returns the per-IP limit of ip.
func (cl *connLimits) limitFor(ip netip.Addr) int64 {
	if n, ok := cl.overrides[ip]; ok {
		return n
	}
	return cl.perIP
}

// addIP counts a connection from remote; false when its address is at its limit (the
// caller closes the connection).
func (cl *connLimits) addIP(remote net.Addr) (netip.Addr, bool) {
	if cl.unlimitedIP {
		return netip.Addr{}, true
	}
	ip := addrIP(remote)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.byIP[ip] >= cl.limitFor(ip) {
		return ip, false
	}
	cl.byIP[ip]++
	return ip, true
}

// dropIP uncounts a connection addIP counted.
func (cl *connLimits) dropIP(ip netip.Addr) {
	if cl.unlimitedIP {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.byIP[ip]--; cl.byIP[ip] <= 0 {
		delete(cl.byIP, ip)
	}
}

// addrIP is the IP address of a connection's remote end (the zero Addr if it has none).
func addrIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// rateLimiter is a token bucket of rate tokens a second holding at most max(rate, 1):
// a second's worth of connections may arrive at once, and the long-run rate is rate.
// Accept-loop goroutine only (no lock).
type rateLimiter struct {
	rate, burst, tokens float64
	last                time.Time
}

func newRateLimiter(rate float64) *rateLimiter {
	b := max(rate, 1)
	return &rateLimiter{rate: rate, burst: b, tokens: b}
}

// take takes a token and returns how long to wait before using it (0: at once).
func (r *rateLimiter) take(now time.Time) time.Duration {
	if r.rate <= 0 {
		// A zero rate admits nothing: wait "forever" (until shutdown).
		return time.Duration(math.MaxInt64)
	}
	if !r.last.IsZero() {
		r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	}
	r.last = now
	r.tokens--
	if r.tokens >= 0 {
		return 0
	}
	return time.Duration(-r.tokens / r.rate * float64(time.Second))
}
