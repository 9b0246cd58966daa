package tlsconf

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrNoRule: no ssl.principal.mapping.rules rule applies to a distinguished name (the
// connection is refused, as Kafka does).
var ErrNoRule = errors.New("no rules apply")

// Mapper maps a certificate's distinguished name to a principal name with Kafka's
// ssl.principal.mapping.rules:
//
//	rules  = rule *( "," rule )            blanks around rules and commas are ignored;
//	rule   = "DEFAULT"                     an empty rule is skipped
//	       / "RULE:" pattern "/" replacement "/" [ "L" / "U" ]
//
// pattern and replacement run to the next '/' that no '\' escapes. A RULE applies
// when its pattern (a Go regular expression; Kafka's are Java ones, and the common
// subset is the same) matches the whole name: the name becomes every match replaced
// by replacement, in Java's replacement syntax ($1, ${name}, \ to take the next
// character literally), then lower-cased (L) or upper-cased (U). DEFAULT applies to
// every name and leaves it as it is. The first rule that applies wins; when none
// does, Name fails with ErrNoRule. The empty string has no rules (everything fails);
// a broker without the config uses "DEFAULT".
//
// Unlike Java's replaceAll, an empty match right after a match is not replaced (Go's
// regexp skips it): a pattern like `(.*)` replaces the name once, where Java would
// also append the replacement for the empty match at the end.
type Mapper struct {
	rules []mapRule
	src   string
}

type mapRule struct {
	isDefault    bool
	pattern      string
	full, search *regexp.Regexp
	repl         []replPart
	lower, upper bool
}

// replPart is literal text, or a group reference (group >= 0, or name).
type replPart struct {
	lit   string
	group int
	name  string
}

// ParseRules parses ssl.principal.mapping.rules.
func ParseRules(s string) (*Mapper, error) {
	m := &Mapper{src: s}
	i := 0
	skip := func() {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			break
		}
		start := i
		switch {
		case s[i] == ',':
			// An empty rule.
		case strings.HasPrefix(s[i:], "DEFAULT"):
			i += len("DEFAULT")
			m.rules = append(m.rules, mapRule{isDefault: true})
		case strings.HasPrefix(s[i:], "RULE:"):
			i += len("RULE:")
			pat, n, ok := scanSegment(s[i:])
			if !ok {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q: no closing '/' after the pattern", s[start:])
			}
			i += n
			repl, n, ok := scanSegment(s[i:])
			if !ok {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q: no closing '/' after the replacement", s[start:])
			}
			i += n
			r, err := newRule(pat, repl)
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: rule %q: %w", s[start:i], err)
			}
			if i < len(s) && (s[i] == 'L' || s[i] == 'U') {
				r.lower, r.upper = s[i] == 'L', s[i] == 'U'
				i++
			}
			m.rules = append(m.rules, r)
		default:
			end := strings.IndexByte(s[i:], ',')
			if end < 0 {
				end = len(s) - i
			}
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q", strings.TrimSpace(s[i:i+end]))
		}
		skip()
		if i >= len(s) {
			break
		}
		if s[i] != ',' {
			return nil, fmt.Errorf("ssl.principal.mapping.rules: invalid rule %q: unmatched %q", strings.TrimSpace(s[start:]), s[i:])
		}
		i++
	}
	return m, nil
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// scanSegment returns the text up to the first '/' not escaped by '\' and the bytes
// consumed including that '/'.
func scanSegment(s string) (seg string, n int, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], i + 1, true
		}
	}
	return "", 0, false
}

func newRule(pattern, replacement string) (mapRule, error) {
	search, err := regexp.Compile(pattern)
	if err != nil {
		return mapRule{}, err
	}
	full, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return mapRule{}, err
	}
	r := mapRule{pattern: pattern, search: search, full: full}
	if r.repl, err = parseReplacement(replacement, search); err != nil {
		return mapRule{}, err
	}
	return r, nil
}

// parseReplacement reads Java's replacement syntax against the pattern's groups.
func parseReplacement(s string, re *regexp.Regexp) ([]replPart, error) {
	var parts []replPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replPart{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	ngroups := re.NumSubexp()
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
			if i >= len(s) {
				return nil, errors.New("replacement ends with '\\': the character to escape is missing")
			}
			lit.WriteByte(s[i])
		case '$':
			i++
			if i >= len(s) {
				return nil, errors.New("replacement ends with '$': illegal group reference")
			}
			if s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, errors.New("replacement: named group reference without '}'")
				}
				name := s[i+1 : i+end]
				if re.SubexpIndex(name) < 0 {
					return nil, fmt.Errorf("replacement: no group named %q", name)
				}
				flush()
				parts = append(parts, replPart{group: -1, name: name})
				i += end
				continue
			}
			if s[i] < '0' || s[i] > '9' {
				return nil, fmt.Errorf("replacement: illegal group reference $%c", s[i])
			}
			// As Java: the first digit always, more while the number stays a group.
			g := int(s[i] - '0')
			for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
				ng := g*10 + int(s[i+1]-'0')
				if ng > ngroups {
					break
				}
				g = ng
				i++
			}
			if g > ngroups {
				return nil, fmt.Errorf("replacement: no group %d", g)
			}
			flush()
			parts = append(parts, replPart{group: g})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// Name maps a distinguished name (SubjectDN's form) to a principal name.
func (m *Mapper) Name(dn string) (string, error) {
	for i := range m.rules {
		if out, ok := m.rules[i].apply(dn); ok {
			return out, nil
		}
	}
	return "", fmt.Errorf("%w to %s, rules %q", ErrNoRule, dn, m.src)
}

// String returns the rules as configured.
func (m *Mapper) String() string { return m.src }

func (r *mapRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.full.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, loc := range r.search.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		for _, p := range r.repl {
			g := p.group
			if p.name != "" {
				g = r.search.SubexpIndex(p.name)
			}
			if g < 0 {
				b.WriteString(p.lit)
			} else if loc[2*g] >= 0 {
				b.WriteString(dn[loc[2*g]:loc[2*g+1]])
			}
		}
		last = loc[1]
	}
	b.WriteString(dn[last:])
	out := b.String()
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, true
}
