package auth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/kernel"
)

// newTestCreds is a credState with bootstrap users and no metadata log.
func newTestCreds(t testing.TB, users ...UserConfig) *credState {
	t.Helper()
	c := new(credState)
	if err := c.init(slog.New(slog.NewTextHandler(io.Discard, nil)), users, nil, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

var aliceUser = UserConfig{Name: "alice", Password: "alice-secret"}

// clientError marks a failure on the client's side of an exchange.
type clientError struct{ err error }

func (e clientError) Error() string { return "client: " + e.err.Error() }

// drive runs franz-go's client mechanism against the server exchange in-process: the
// client's messages go to Step, Step's replies to the client's Challenge. It returns
// the server's error (or a clientError) and checks both sides finish together.
func drive(t testing.TB, m sasl.Mechanism, x kernel.SASLExchange) error {
	t.Helper()
	ctx := context.Background()
	sess, msg, err := m.Authenticate(ctx, "127.0.0.1:9092")
	if err != nil {
		return clientError{err}
	}
	for range 4 {
		reply, done, err := x.Step(ctx, msg)
		if err != nil {
			return err
		}
		clientDone, next, err := sess.Challenge(reply)
		if err != nil {
			return clientError{err}
		}
		if done {
			if !clientDone {
				t.Fatalf("%s: the server is done, the client is not", m.Name())
			}
			return nil
		}
		if clientDone {
			t.Fatalf("%s: the client is done, the server is not", m.Name())
		}
		msg = next
	}
	t.Fatalf("%s: no end after 4 round trips", m.Name())
	return nil
}

func clientSCRAM(t testing.TB, mech, user, pass string, mod func(*scram.Auth)) sasl.Mechanism {
	t.Helper()
	a := scram.Auth{User: user, Pass: pass}
	if mod != nil {
		mod(&a)
	}
	if mech == MechSCRAM512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

func start(t testing.TB, c *credState, mech string) kernel.SASLExchange {
	t.Helper()
	var x kernel.SASLExchange
	var err error
	if mech == MechPlain {
		x, err = c.startPlain(nil)
	} else {
		x, err = c.startSCRAM(mech, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestSCRAMFranzClient(t *testing.T) {
	c := newTestCreds(t, aliceUser, UserConfig{Name: "b,o=b", Password: "pw"})
	for _, mech := range []string{MechSCRAM256, MechSCRAM512} {
		t.Run(mech, func(t *testing.T) {
			tests := []struct {
				name, user, pass string
				mod              func(*scram.Auth)
				wantErr          error // nil: success
			}{
				{name: "ok", user: "alice", pass: "alice-secret"},
				{name: "escaped name", user: "b,o=b", pass: "pw"},
				{name: "authzid is the user", user: "alice", pass: "alice-secret", mod: func(a *scram.Auth) { a.Zid = "alice" }},
				{name: "authzid is someone else", user: "alice", pass: "alice-secret", mod: func(a *scram.Auth) { a.Zid = "bob" }, wantErr: errAuthzID},
				{name: "tokenauth", user: "alice", pass: "alice-secret", mod: func(a *scram.Auth) { a.IsToken = true }, wantErr: errTokenAuth},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					x := start(t, c, mech)
					err := drive(t, clientSCRAM(t, mech, tt.user, tt.pass, tt.mod), x)
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					if tt.wantErr == nil {
						if p := x.Principal(); p != (kernel.Principal{Type: "User", Name: tt.user}) {
							t.Fatalf("principal = %v", p)
						}
						if !x.Expiry().IsZero() {
							t.Fatalf("expiry = %v", x.Expiry())
						}
					}
					// The exchange is over either way.
					if _, _, err := x.Step(context.Background(), []byte("n,,n=alice,r=abc")); err == nil {
						t.Fatal("a step after the end succeeded")
					}
				})
			}
		})
	}
}

// TestSCRAMUnknownUserLikeWrongPassword: an unknown user and a wrong password fail at
// the same step with the same text, and an unknown user's server-first looks like a
// real one's (same salt on every attempt, same salt length and iterations).
func TestSCRAMUnknownUserLikeWrongPassword(t *testing.T) {
	c := newTestCreds(t, aliceUser)
	for _, mech := range []string{MechSCRAM256, MechSCRAM512} {
		t.Run(mech, func(t *testing.T) {
			wrong := drive(t, clientSCRAM(t, mech, "alice", "nope", nil), start(t, c, mech))
			unknown := drive(t, clientSCRAM(t, mech, "mallory", "nope", nil), start(t, c, mech))
			if wrong == nil || unknown == nil {
				t.Fatalf("wrong password: %v; unknown user: %v", wrong, unknown)
			}
			var ce clientError
			if errors.As(wrong, &ce) || errors.As(unknown, &ce) {
				t.Fatalf("failed on the client side: %v / %v", wrong, unknown)
			}
			if wrong.Error() != unknown.Error() {
				t.Fatalf("wrong password: %q; unknown user: %q", wrong, unknown)
			}
			if strings.Contains(unknown.Error(), "mallory") || strings.Contains(unknown.Error(), "unknown") {
				t.Fatalf("the failure names the user or says it is unknown: %q", unknown)
			}
			first := func(user string) (salt, iters string) {
				x := start(t, c, mech)
				s1, _, err := x.Step(context.Background(), []byte("n,,n="+user+",r=clientnonce"))
				if err != nil {
					t.Fatal(err)
				}
				f := strings.Split(string(s1), ",")
				if len(f) != 3 || !strings.HasPrefix(f[0], "r=clientnonce") {
					t.Fatalf("server-first %q", s1)
				}
				return f[1], f[2]
			}
			s1, i1 := first("mallory")
			s2, i2 := first("mallory")
			s3, i3 := first("alice")
			if s1 != s2 || i1 != i2 {
				t.Fatalf("an unknown user's salt changes between attempts: %s %s / %s %s", s1, i1, s2, i2)
			}
			if len(s1) != len(s3) || i1 != i3 {
				t.Fatalf("an unknown user's server-first differs in shape: %s %s / %s %s", s1, i1, s3, i3)
			}
		})
	}
}

func TestSCRAMGarbage(t *testing.T) {
	c := newTestCreds(t, aliceUser)
	long := bytes.Repeat([]byte("a"), maxSCRAMMessage+1)
	firsts := []struct {
		name string
		msg  []byte
		want error
	}{
		{"empty", nil, errSCRAMMalformed},
		{"no fields", []byte("hello"), errSCRAMMalformed},
		{"bad gs2 flag", []byte("x,,n=alice,r=abc"), errSCRAMMalformed},
		{"channel binding asked", []byte("p=tls-unique,,n=alice,r=abc"), errSCRAMMalformed},
		{"mandatory extension", []byte("n,,m=ext,n=alice,r=abc"), errSCRAMMalformed},
		{"bad escape", []byte("n,,n=al=ZZice,r=abc"), errSCRAMMalformed},
		{"no nonce", []byte("n,,n=alice,x=abc"), errSCRAMMalformed},
		{"not utf-8", []byte("n,,n=\xff,r=abc"), errSCRAMMalformed},
		{"too long", long, errSCRAMTooLong},
		{"tokenauth TRUE", []byte("n,,n=alice,r=abc,tokenauth=TRUE"), errTokenAuth},
	}
	for _, tt := range firsts {
		t.Run("first/"+tt.name, func(t *testing.T) {
			x := start(t, c, MechSCRAM256)
			if _, done, err := x.Step(context.Background(), tt.msg); !errors.Is(err, tt.want) || done {
				t.Fatalf("done %v, err %v, want %v", done, err, tt.want)
			}
		})
	}
	finals := []struct {
		name  string
		final func(nonce string) string
	}{
		{"empty", func(string) string { return "" }},
		{"wrong nonce", func(string) string { return "c=biws,r=other,p=AAAA" }},
		{"wrong channel binding", func(n string) string { return "c=eSws,r=" + n + ",p=AAAA" }},
		{"proof not base64", func(n string) string { return "c=biws,r=" + n + ",p=!!!" }},
		{"short proof", func(n string) string { return "c=biws,r=" + n + ",p=AAAA" }},
		{"no proof", func(n string) string { return "c=biws,r=" + n }},
	}
	for _, tt := range finals {
		t.Run("final/"+tt.name, func(t *testing.T) {
			x := start(t, c, MechSCRAM256)
			s1, _, err := x.Step(context.Background(), []byte("n,,n=alice,r=abc"))
			if err != nil {
				t.Fatal(err)
			}
			nonce := strings.TrimPrefix(strings.Split(string(s1), ",")[0], "r=")
			if _, done, err := x.Step(context.Background(), []byte(tt.final(nonce))); err == nil || done {
				t.Fatalf("done %v, err %v", done, err)
			}
		})
	}
}

func TestSCRAMStoredOverBootstrap(t *testing.T) {
	c := newTestCreds(t, aliceUser)
	cr, err := deriveCredential(mechSHA512, "rotated", []byte("salt-salt-salt"), 8192)
	if err != nil {
		t.Fatal(err)
	}
	c.apply(&kernel.Image{Version: 3, Extensions: map[string]map[string][]byte{
		CredentialNamespace: {
			credKey(mechSHA512, "alice"): encodeCredential(cr),
			credKey(mechSHA256, "carol"): []byte("garbage"), // skipped
			"no-mechanism":               []byte("garbage"),
		},
	}})
	for _, tt := range []struct {
		mech, pass string
		ok         bool
	}{
		{MechSCRAM512, "rotated", true},
		{MechSCRAM512, "alice-secret", false},
		{MechSCRAM256, "alice-secret", true}, // still the bootstrap one
	} {
		err := drive(t, clientSCRAM(t, tt.mech, "alice", tt.pass, nil), start(t, c, tt.mech))
		if (err == nil) != tt.ok {
			t.Errorf("%s with %q: err %v, want ok %v", tt.mech, tt.pass, err, tt.ok)
		}
	}
	// PLAIN prefers the stored credential.
	if _, ok := c.checkPassword("alice", "rotated"); !ok {
		t.Error("PLAIN does not check the stored credential")
	}
	if _, ok := c.checkPassword("alice", "alice-secret"); ok {
		t.Error("PLAIN checks the bootstrap credential over a stored one")
	}
	if c.lookup(mechSHA256, "carol") != nil {
		t.Error("a malformed stored value became a credential")
	}
	// An older image changes nothing; a newer one without the value restores the
	// bootstrap credential.
	c.apply(&kernel.Image{Version: 2})
	if c.lookup(mechSHA512, "alice").bootstrap {
		t.Error("an older image replaced the index")
	}
	c.apply(&kernel.Image{Version: 4})
	if !c.lookup(mechSHA512, "alice").bootstrap {
		t.Error("a deleted stored credential still shadows the bootstrap one")
	}
}

func TestBootstrapUsersValidated(t *testing.T) {
	for _, tt := range []struct {
		name  string
		users []UserConfig
	}{
		{"empty name", []UserConfig{{Name: "", Password: "x"}}},
		{"long name", []UserConfig{{Name: strings.Repeat("a", MaxUserLen+1), Password: "x"}}},
		{"control character", []UserConfig{{Name: "a\x00b", Password: "x"}}},
		{"empty password", []UserConfig{{Name: "a"}}},
		{"long password", []UserConfig{{Name: "a", Password: strings.Repeat("x", MaxPasswordLen+1)}}},
		{"twice", []UserConfig{aliceUser, aliceUser}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := new(credState).init(slog.New(slog.NewTextHandler(io.Discard, nil)), tt.users, nil, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestPlainFranzClient(t *testing.T) {
	c := newTestCreds(t, aliceUser)
	tests := []struct {
		name            string
		zid, user, pass string
		wantErr         error
	}{
		{name: "ok", user: "alice", pass: "alice-secret"},
		{name: "authzid is the user", zid: "alice", user: "alice", pass: "alice-secret"},
		{name: "authzid is someone else", zid: "bob", user: "alice", pass: "alice-secret", wantErr: errAuthzID},
		{name: "wrong password", user: "alice", pass: "nope", wantErr: errPlainInvalid},
		{name: "unknown user", user: "mallory", pass: "nope", wantErr: errPlainInvalid},
		{name: "name too long", user: strings.Repeat("a", MaxUserLen+1), pass: "nope", wantErr: errPlainInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := start(t, c, MechPlain)
			err := drive(t, plain.Auth{Zid: tt.zid, User: tt.user, Pass: tt.pass}.AsMechanism(), x)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && x.Principal() != (kernel.Principal{Type: "User", Name: tt.user}) {
				t.Fatalf("principal = %v", x.Principal())
			}
			if _, _, err := x.Step(context.Background(), []byte("\x00alice\x00alice-secret")); err == nil {
				t.Fatal("a second step succeeded")
			}
		})
	}
}

func TestPlainGarbage(t *testing.T) {
	c := newTestCreds(t, aliceUser)
	for _, tt := range []struct {
		name string
		msg  string
		want error
	}{
		{"empty", "", errPlainMalformed},
		{"two fields", "alice\x00alice-secret", errPlainMalformed},
		{"four fields", "\x00alice\x00alice-secret\x00", errPlainMalformed},
		{"no user", "\x00\x00alice-secret", errPlainNoUser},
		{"no password", "\x00alice\x00", errPlainNoPass},
		{"too long", "\x00alice\x00" + strings.Repeat("x", maxPlainMessage), errPlainTooLong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, done, err := start(t, c, MechPlain).Step(context.Background(), []byte(tt.msg))
			if done || !errors.Is(err, tt.want) {
				t.Fatalf("done %v, err %v, want %v", done, err, tt.want)
			}
		})
	}
}

// TestCheckPasswordTiming: an unknown user costs about what a wrong password does (a
// full PBKDF2), not the microseconds of a map miss. Loose bounds: the machine is shared.
func TestCheckPasswordTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	c := newTestCreds(t, aliceUser)
	best := func(user string) time.Duration {
		var min time.Duration
		for i := range 5 {
			start := time.Now()
			for range 10 {
				c.checkPassword(user, "nope")
			}
			if d := time.Since(start); i == 0 || d < min {
				min = d
			}
		}
		return min
	}
	wrong, unknown := best("alice"), best("mallory")
	if ratio := float64(unknown) / float64(wrong); ratio < 0.33 || ratio > 3 {
		t.Fatalf("10 checks: unknown user %v, wrong password %v (ratio %.2f)", unknown, wrong, ratio)
	}
}

func BenchmarkSCRAMLogin(b *testing.B) {
	c := newTestCreds(b, aliceUser)
	for _, mech := range []string{MechSCRAM256, MechSCRAM512} {
		b.Run(mech, func(b *testing.B) {
			m := clientSCRAM(b, mech, "alice", "alice-secret", nil)
			for range b.N {
				if err := drive(b, m, start(b, c, mech)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPlainCheck(b *testing.B) {
	c := newTestCreds(b, aliceUser)
	for range b.N {
		if _, ok := c.checkPassword("alice", "alice-secret"); !ok {
			b.Fatal("refused")
		}
	}
}

func FuzzSCRAMExchange(f *testing.F) {
	f.Add([]byte(""), []byte(""))
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,a=alice,n=alice,r=abc,tokenauth=true"), []byte(""))
	f.Add([]byte("y,,n=al=2Cice,r=abc"), []byte("c=eSws,r=abcdef,x=1,p=dGVzdA=="))
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA,c=biws,r=abc,p=AAAA"))
	c := newTestCreds(f, aliceUser)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		x, err := c.startSCRAM(MechSCRAM256, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := x.Step(context.Background(), first)
		if done {
			t.Fatal("done after client-first")
		}
		if err != nil {
			return
		}
		// The server nonce is random, so no fixed client-final carries a valid proof.
		if _, done, err := x.Step(context.Background(), final); done || err == nil {
			t.Fatalf("client-final %q accepted", final)
		}
	})
}

func FuzzPlain(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("\x00alice\x00alice-secret"))
	f.Add([]byte("alice\x00alice\x00alice-secret"))
	f.Add([]byte("\x00alice\x00alice-secret\x00\x00alice\x00alice-secret"))
	f.Add([]byte("\x00\x00"))
	c := newTestCreds(f, aliceUser)
	f.Fuzz(func(t *testing.T, msg []byte) {
		x, _ := c.startPlain(nil)
		_, done, err := x.Step(context.Background(), msg)
		if done != (err == nil) {
			t.Fatalf("done %v with err %v", done, err)
		}
		ok := bytes.Equal(msg, []byte("\x00alice\x00alice-secret")) || bytes.Equal(msg, []byte("alice\x00alice\x00alice-secret"))
		if done != ok {
			t.Fatalf("message %q: done %v", msg, done)
		}
	})
}
