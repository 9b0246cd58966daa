package auth

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The OAUTHBEARER client's initial response (RFC 7628 section 3.1):
//
//	gs2-header  = "n," [ "a=" saslname ] ","       ; no channel binding
//	message     = gs2-header %x01 *( key "=" value %x01 ) %x01
//	key         = 1*ALPHA
//	value       = 1*( %x21-7E / SP / HTAB / CR / LF )
//	auth        = "auth=" "Bearer" 1*SP b64token     ; the one required pair
//	b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
//
// saslname escapes "," as "=2C" and "=" as "=3D" (RFC 5801). Every other key/value
// pair is a SASL extension (KIP-342).
const (
	// maxOAuthMessage bounds the client's message: a JWT with a generous claim set
	// is a few KiB; Kafka has no bound of its own beyond the request size.
	maxOAuthMessage = 64 << 10
	// maxOAuthPairs bounds the key/value pairs (auth and the extensions).
	maxOAuthPairs = 64
	// maxOAuthKey bounds a key's length.
	maxOAuthKey = 64
)

// errOAuthMessage marks a client message that does not parse. Its wrapped texts name
// what is wrong, never the bytes that were sent.
var errOAuthMessage = errors.New("malformed OAUTHBEARER client message")

// oauthMessage is a parsed client initial response.
type oauthMessage struct {
	authzid    string            // "" when the GS2 header names none
	token      string            // the bearer token
	extensions map[string]string // SASL extensions; nil when there are none
}

func oauthMsgErr(what string) error { return fmt.Errorf("%w: %s", errOAuthMessage, what) }

// parseOAuthMessage parses the client's initial response strictly: anything outside
// the grammar above is refused, as are duplicate keys and messages larger than
// maxOAuthMessage.
func parseOAuthMessage(msg []byte) (oauthMessage, error) {
	var m oauthMessage
	if len(msg) > maxOAuthMessage {
		return m, oauthMsgErr(fmt.Sprintf("larger than %d bytes", maxOAuthMessage))
	}
	s := msg
	switch {
	case bytes.HasPrefix(s, []byte("n,")):
		s = s[2:]
	case bytes.HasPrefix(s, []byte("y,")), bytes.HasPrefix(s, []byte("p=")):
		return m, oauthMsgErr("channel binding is not supported")
	default:
		return m, oauthMsgErr("no GS2 header")
	}
	switch {
	case bytes.HasPrefix(s, []byte("a=")):
		i := bytes.IndexByte(s, ',')
		if i < 0 {
			return m, oauthMsgErr("unterminated GS2 header")
		}
		z, err := decodeSASLName(s[2:i])
		if err != nil {
			return m, err
		}
		m.authzid, s = z, s[i+1:]
	case bytes.HasPrefix(s, []byte(",")):
		s = s[1:]
	default:
		return m, oauthMsgErr("bad GS2 header")
	}
	if len(s) == 0 || s[0] != 0x01 {
		return m, oauthMsgErr("no separator after the GS2 header")
	}
	s = s[1:]
	var sawAuth bool
	for pairs := 0; ; pairs++ {
		if len(s) == 0 {
			return m, oauthMsgErr("truncated: no final separator")
		}
		if s[0] == 0x01 {
			if len(s) != 1 {
				return m, oauthMsgErr("bytes after the final separator")
			}
			break
		}
		if pairs == maxOAuthPairs {
			return m, oauthMsgErr(fmt.Sprintf("more than %d key/value pairs", maxOAuthPairs))
		}
		i := bytes.IndexByte(s, 0x01)
		if i < 0 {
			return m, oauthMsgErr("truncated: unterminated key/value pair")
		}
		kv := s[:i]
		s = s[i+1:]
		eq := bytes.IndexByte(kv, '=')
		if eq < 0 {
			return m, oauthMsgErr("a key/value pair without '='")
		}
		key, val := kv[:eq], kv[eq+1:]
		if err := checkOAuthKey(key); err != nil {
			return m, err
		}
		if err := checkOAuthValue(val); err != nil {
			return m, err
		}
		if string(key) == "auth" {
			if sawAuth {
				return m, oauthMsgErr("auth given twice")
			}
			sawAuth = true
			tok, err := parseBearer(val)
			if err != nil {
				return m, err
			}
			m.token = tok
			continue
		}
		if m.extensions == nil {
			m.extensions = make(map[string]string)
		}
		if _, dup := m.extensions[string(key)]; dup {
			return m, oauthMsgErr("an extension given twice")
		}
		m.extensions[string(key)] = string(val)
	}
	if !sawAuth {
		return m, oauthMsgErr("no auth key")
	}
	return m, nil
}

func checkOAuthKey(k []byte) error {
	if len(k) == 0 {
		return oauthMsgErr("an empty key")
	}
	if len(k) > maxOAuthKey {
		return oauthMsgErr(fmt.Sprintf("a key longer than %d bytes", maxOAuthKey))
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return oauthMsgErr("a key that is not alphabetic")
		}
	}
	return nil
}

func checkOAuthValue(v []byte) error {
	if len(v) == 0 {
		return oauthMsgErr("an empty value")
	}
	for _, c := range v {
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return oauthMsgErr("a value with a byte outside VCHAR, SP, HTAB, CR, LF")
		}
	}
	return nil
}

// parseBearer takes auth's value, "Bearer" (any case), one or more spaces and a
// b64token (RFC 6750 section 2.1), and returns the token.
func parseBearer(v []byte) (string, error) {
	sp := bytes.IndexByte(v, ' ')
	if sp < 0 || !strings.EqualFold(string(v[:sp]), "Bearer") {
		return "", oauthMsgErr("auth is not a Bearer credential")
	}
	tok := bytes.TrimLeft(v[sp:], " ")
	if len(tok) == 0 {
		return "", oauthMsgErr("an empty bearer token")
	}
	i := 0
	for i < len(tok) && isB64TokenChar(tok[i]) {
		i++
	}
	if i == 0 {
		return "", oauthMsgErr("a bearer token that is not a b64token")
	}
	for i < len(tok) && tok[i] == '=' {
		i++
	}
	if i != len(tok) {
		return "", oauthMsgErr("a bearer token that is not a b64token")
	}
	return string(tok), nil
}

func isB64TokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
}

// decodeSASLName decodes an RFC 5801 saslname: UTF-8 without NUL, "," or "=" except
// the escapes "=2C" and "=3D". Control characters are refused too: the authzid is
// compared with a principal's name.
func decodeSASLName(b []byte) (string, error) {
	if len(b) == 0 {
		return "", oauthMsgErr("an empty authorization id")
	}
	if !utf8.Valid(b) {
		return "", oauthMsgErr("an authorization id that is not UTF-8")
	}
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '=':
			if i+2 >= len(b) {
				return "", oauthMsgErr("a bad escape in the authorization id")
			}
			switch string(b[i+1 : i+3]) {
			case "2C":
				sb.WriteByte(',')
			case "3D":
				sb.WriteByte('=')
			default:
				return "", oauthMsgErr("a bad escape in the authorization id")
			}
			i += 2
		case c < 0x20 || c == 0x7f:
			return "", oauthMsgErr("a control character in the authorization id")
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String(), nil
}
