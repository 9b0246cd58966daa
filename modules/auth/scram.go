package auth

import (
	"context"
	"crypto/hmac"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xdg-go/scram"

	"github.com/sluicehq/sluice/kernel"
)

// maxSCRAMMessage bounds one client SCRAM message: a client-first with an escaped
// MaxUserLen name and authzid, or a client-final with their base64 and a SHA-512 proof,
// fit with room to spare.
const maxSCRAMMessage = 4096

// SCRAM failures. Their texts reach the client (SaslAuthenticate's error message) and
// never tell whether the user exists: an unknown user fails exactly as a wrong password.
var (
	errSCRAMMalformed = errors.New("authentication failed: malformed SCRAM message")
	errSCRAMTooLong   = fmt.Errorf("authentication failed: SCRAM message longer than %d bytes", maxSCRAMMessage)
	errSCRAMOver      = errors.New("authentication failed: the SCRAM exchange is over")
	errTokenAuth      = errors.New("authentication failed: delegation tokens (the tokenauth SCRAM extension) are not supported")
	errAuthzID        = errors.New("authentication failed: the authorization id is not the user name")
)

// scramExchange is one SCRAM-SHA-256 or SCRAM-SHA-512 exchange (RFC 5802, RFC 7677),
// server side. The client-first message is parsed and the server-first built by
// xdg-go/scram's conversation; the client-final is checked here (finalStep), because
// Kafka's server accepts a final nonce that merely ends with the server's nonce and
// librdkafka relies on that (it sends its own nonce in front of the server's whole
// one), where xdg-go, as RFC 5802 says, wants the two equal. This adds Kafka's rules
// (authzid empty or the user, no tokenauth), size bounds, and the fake credential of
// unknown users.
type scramExchange struct {
	c     *credState
	mech  scramMech
	conv  *scram.ServerConversation
	step  int // 0: expects client-first; 1: client-final; 2: over
	known bool
	p     kernel.Principal

	// Kept from the first round for the proof check.
	cred        scram.StoredCredentials
	gs2         string // the client-first's GS2 header, "n,," or "n,a=<authzid>,"
	firstBare   string // the client-first without the GS2 header
	serverFirst string
	nonce       string // the server-first's nonce (client's then server's part)
}

// startSCRAM begins an exchange of mechanism (SCRAM-SHA-256 or SCRAM-SHA-512).
func (c *credState) startSCRAM(mechanism string, _ *kernel.ConnInfo) (kernel.SASLExchange, error) {
	mech, ok := mechByName(mechanism)
	if !ok {
		return nil, fmt.Errorf("%q is not a SCRAM mechanism", mechanism)
	}
	x := &scramExchange{c: c, mech: mech}
	gen := scram.SHA256
	if mech == mechSHA512 {
		gen = scram.SHA512
	}
	srv, err := gen.NewServer(x.lookup)
	if err != nil {
		return nil, fmt.Errorf("scram server: %w", err)
	}
	x.conv = srv.NewConversation()
	return x, nil
}

// lookup is the conversation's credential callback. It never fails: an unknown user
// gets the fake credential (computed on every call, so both paths cost the same).
func (x *scramExchange) lookup(user string) (scram.StoredCredentials, error) {
	cr := x.c.fakeCredential(x.mech, user)
	if found := x.c.lookup(x.mech, user); found != nil {
		cr, x.known = found, true
	}
	x.cred = scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(cr.salt), Iters: cr.iterations},
		StoredKey:  cr.storedKey,
		ServerKey:  cr.serverKey,
	}
	return x.cred, nil
}

// Step takes client-first (answering server-first), then client-final (answering
// server-final, done). Any failure ends the exchange.
func (x *scramExchange) Step(_ context.Context, msg []byte) ([]byte, bool, error) {
	step := x.step
	x.step = 2
	if step > 1 {
		return nil, false, errSCRAMOver
	}
	if len(msg) > maxSCRAMMessage {
		return nil, false, errSCRAMTooLong
	}
	if !utf8.Valid(msg) {
		return nil, false, errSCRAMMalformed
	}
	if step == 0 {
		if tokenAuth(string(msg)) {
			return nil, false, errTokenAuth
		}
		reply, err := x.conv.Step(string(msg))
		if err != nil {
			return nil, false, errSCRAMMalformed
		}
		if z := x.conv.AuthzID(); z != "" && z != x.conv.Username() {
			return nil, false, errAuthzID
		}
		if !x.keepFirst(string(msg), reply) {
			return nil, false, errSCRAMMalformed
		}
		x.step = 1
		return []byte(reply), false, nil
	}
	return x.finalStep(string(msg))
}

// keepFirst keeps what the proof check needs from the first round: the GS2 header and
// the bare client-first (xdg-go accepted the message, so the header is two fields), the
// server-first and its nonce.
func (x *scramExchange) keepFirst(clientFirst, serverFirst string) bool {
	i := strings.IndexByte(clientFirst, ',')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(clientFirst[i+1:], ',')
	if j < 0 {
		return false
	}
	x.gs2, x.firstBare = clientFirst[:i+j+2], clientFirst[i+j+2:]
	nonce, _, _ := strings.Cut(serverFirst, ",")
	var ok bool
	if x.nonce, ok = strings.CutPrefix(nonce, "r="); !ok || x.nonce == "" {
		return false
	}
	x.serverFirst = serverFirst
	return true
}

// finalStep checks client-final = "c=" base64(gs2 header) ",r=" nonce [",x=..."]* ",p="
// proof, as Kafka's server does: the nonce must end with the server-first's (RFC 5802
// wants it equal; librdkafka sends its own nonce in front of it, and Kafka accepts
// that), the channel binding must repeat the GS2 header, and ClientKey = proof XOR
// HMAC(StoredKey, AuthMessage) must hash to StoredKey (compared in constant time).
// AuthMessage is client-first-bare "," server-first "," client-final-without-proof,
// as sent. On success the reply is "v=" base64(HMAC(ServerKey, AuthMessage)).
func (x *scramExchange) finalStep(msg string) ([]byte, bool, error) {
	withoutProof, proofB64, ok := cutLast(msg, ",p=")
	if !ok {
		return nil, false, errSCRAMMalformed
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 {
		return nil, false, errSCRAMMalformed
	}
	cb, ok1 := strings.CutPrefix(fields[0], "c=")
	nonce, ok2 := strings.CutPrefix(fields[1], "r=")
	if !ok1 || !ok2 || cb != base64.StdEncoding.EncodeToString([]byte(x.gs2)) {
		return nil, false, errSCRAMMalformed
	}
	for _, f := range fields[2:] {
		if strings.HasPrefix(f, "m=") || len(f) < 2 || f[1] != '=' {
			return nil, false, errSCRAMMalformed // a mandatory extension, or not an attribute
		}
	}
	if !strings.HasSuffix(nonce, x.nonce) {
		return nil, false, errSCRAMMalformed
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != x.mech.size() || len(x.cred.StoredKey) != x.mech.size() {
		return nil, false, x.invalid()
	}
	authMessage := []byte(x.firstBare + "," + x.serverFirst + "," + withoutProof)
	h := x.mech.newHash()
	mac := hmac.New(h, x.cred.StoredKey)
	mac.Write(authMessage)
	clientKey := mac.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	sum := h()
	sum.Write(clientKey)
	if subtle.ConstantTimeCompare(sum.Sum(nil), x.cred.StoredKey) != 1 || !x.known {
		// A wrong proof: a wrong password or an unknown user (whose fake keys no
		// password matches); one message for both.
		return nil, false, x.invalid()
	}
	mac = hmac.New(h, x.cred.ServerKey)
	mac.Write(authMessage)
	x.p = kernel.Principal{Type: "User", Name: x.conv.Username()}
	return []byte("v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))), true, nil
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// invalid is the failure of a wrong proof (Kafka words it alike).
func (x *scramExchange) invalid() error {
	return fmt.Errorf("authentication failed: invalid credentials with SASL mechanism %s", x.mech)
}

// Principal is User:<name> once Step returned done.
func (x *scramExchange) Principal() kernel.Principal { return x.p }

// Expiry is zero: a SCRAM session lasts until connections.max.reauth.ms.
func (x *scramExchange) Expiry() time.Time { return time.Time{} }

// tokenAuth reports whether a client-first message asks for delegation-token
// authentication (KIP-48's "tokenauth=true" extension, after the nonce).
func tokenAuth(clientFirst string) bool {
	fields := strings.Split(clientFirst, ",")
	if len(fields) <= 4 {
		return false
	}
	for _, f := range fields[4:] {
		if k, v, ok := strings.Cut(f, "="); ok && k == "tokenauth" && strings.EqualFold(v, "true") {
			return true
		}
	}
	return false
}

var _ kernel.SASLExchange = (*scramExchange)(nil)
