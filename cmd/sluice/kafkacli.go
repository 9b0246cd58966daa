package main

// The Kafka-protocol commands (topic, group, cluster, quota, produce, consume) share this:
// how to reach the brokers, flags that may come before or after positional arguments,
// tables or JSON on stdout, and exit codes (0 done, 1 failed, 2 usage).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// envBrokers holds the seed brokers when --brokers is not given.
const envBrokers = "SLUICE_BROKERS"

const defaultBrokers = "127.0.0.1:9092"

// kafkaHelp is the part of the usage texts about reaching the brokers.
const kafkaHelp = `Connecting (every topic, group, cluster, quota, produce and consume command):
  --brokers HOST:PORT[,HOST:PORT...]
                        seed brokers (default $SLUICE_BROKERS, else 127.0.0.1:9092)
  --timeout DURATION    how long a request may take (default 10s)
  --json                print JSON instead of tables
Flags may come before or after the other arguments. Exit status: 0 done, 1 failed
(the message says why), 2 wrong usage.
` + kafkaSecurityHelp

// kafkaFlags say how to reach the brokers and how to print.
type kafkaFlags struct {
	brokers string
	timeout time.Duration
	json    bool
	sec     kafkaSecurity
}

func (k *kafkaFlags) register(fs *flag.FlagSet) {
	def := os.Getenv(envBrokers)
	if def == "" {
		def = defaultBrokers
	}
	fs.StringVar(&k.brokers, "brokers", def, "seed brokers HOST:PORT[,...] (or $"+envBrokers+")")
	fs.StringVar(&k.brokers, "b", def, "shorthand for --brokers")
	fs.DurationVar(&k.timeout, "timeout", 10*time.Second, "request timeout")
	fs.BoolVar(&k.json, "json", false, "print JSON")
	k.sec.register(fs)
}

// newKafkaFlagSet is newFlagSet with the kafkaFlags registered on it.
func newKafkaFlagSet(name, usage string, stderr io.Writer) (*flag.FlagSet, *kafkaFlags) {
	fs := newFlagSet(name, usage, stderr)
	kf := &kafkaFlags{}
	kf.register(fs)
	return fs, kf
}

// seeds splits --brokers.
func (k *kafkaFlags) seeds() []string {
	var out []string
	for _, s := range strings.Split(k.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// client returns a kgo client for the seeds after checking that one answers: a
// broker that cannot be reached is an error that says what to check, not a retry
// loop that ends in a context deadline.
func (k *kafkaFlags) client(ctx context.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds := k.seeds()
	if len(seeds) == 0 {
		return nil, usageError{"--brokers is empty"}
	}
	secOpts, login, err := k.sec.opts()
	if err != nil {
		return nil, err
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(min(k.timeout, 5*time.Second)),
		kgo.RequestTimeoutOverhead(k.timeout),
		kgo.RetryTimeout(k.timeout),
		kgo.ClientID("sluice-cli"),
	}
	base = append(base, secOpts...)
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, unreachable(k.brokers, login, k.sec.tlsOn(), err)
	}
	return cl, nil
}

// parse parses args with fs (which has kf's flags) and checks the number of
// positional arguments (see wantArgs).
func (k *kafkaFlags) parse(fs *flag.FlagSet, args []string, minN, maxN int, what string) ([]string, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, wantArgs(pos, minN, maxN, what)
}

// connect returns a context of spans request timeouts and an admin client; done
// closes the client and ends the context.
func (k *kafkaFlags) connect(spans int) (ctx context.Context, adm *adminConn, done func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(spans)*k.timeout)
	cl, err := k.client(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	adm = &adminConn{Client: kadm.NewClient(cl), kgo: cl}
	adm.SetTimeoutMillis(int32(k.timeout.Milliseconds()))
	return ctx, adm, func() { cl.Close(); cancel() }, nil
}

// adminConn is a kadm client that keeps its kgo client (for raw requests).
type adminConn struct {
	*kadm.Client
	kgo *kgo.Client
}

// unreachable words a failed first contact: what failed and what to check. login
// describes the SASL login ("" without one); tlsOn says whether TLS was asked.
func unreachable(brokers, login string, tlsOn bool, err error) error {
	var hint string
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var rh tls.RecordHeaderError
	var eof *kgo.ErrFirstReadEOF
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("the broker at %s refused the login (%s): %v\n  check the user, the password and the mechanism (--sasl-mechanism; the broker's sasl.enabled.mechanisms)", brokers, login, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("the broker at %s does not take this login (%s): %v\n  give --sasl-mechanism one the listener enables (its sasl.enabled.mechanisms), or drop --user if it is not a SASL listener", brokers, login, err)
	case errors.As(err, &ua):
		hint = "the brokers' certificate is signed by a CA this client does not trust: give --tls-ca with that CA's PEM"
	case errors.As(err, &hn):
		hint = "the brokers' certificate does not name the address dialled: use a name it holds in --brokers (or advertise one)"
	case errors.As(err, &rh), tlsOn && errors.As(err, &eof):
		hint = "the listener does not seem to speak TLS: drop --tls and the --tls-* flags"
	case errors.Is(err, context.DeadlineExceeded):
		hint = "no answer in time: check the address, a firewall, or give --timeout more"
	case tlsOn || login != "":
		hint = "is a broker running there, and does the listener speak what was asked (TLS, SASL)?"
	default:
		hint = "is a broker running there? `sluice serve` listens on 127.0.0.1:9092 by default; a listener that needs TLS or SASL wants --tls, --tls-ca or --user (see --help)"
	}
	return fmt.Errorf("cannot reach a broker at %s: %v\n  %s; set --brokers or $%s", brokers, err, hint, envBrokers)
}

// usageError is wrong usage: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode prints err (if any) for prog and returns the exit status.
func exitCode(stderr io.Writer, prog string, err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// parseFlags parses args with fs, letting flags come after positional arguments
// ("--" ends the flags). It returns the positional arguments. A bad flag is a
// usageError; -h prints fs's usage and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first non-flag, or after a "--" it consumed.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet is a FlagSet whose errors and usage go to stderr, with the usage text
// given (the flags' defaults are appended).
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, minN, maxN int, what string) error {
	if len(args) < minN {
		return usageError{"missing " + what}
	}
	if maxN >= 0 && len(args) > maxN {
		return usageError{fmt.Sprintf("unexpected arguments %q", args[maxN:])}
	}
	return nil
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(toAny(header)...)
	}
	return t
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() { _ = t.tw.Flush() }

// printJSON writes v as indented JSON, with <, > and & as they are (a default quota
// entity is "<default>").
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// errString is err's message, "" for nil (for JSON and table cells).
func errString(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// kerrOf is the error of a response's error code and message, nil for 0.
func kerrOf(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	err := kerr.ErrorForCode(code)
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// topicID prints a topic id as Kafka does (URL-safe base64, unpadded).
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// errWithMessage is err's message with the broker's own message for it, if any.
func errWithMessage(err error, msg string) string {
	s := errString(err)
	if err == nil || msg == "" || msg == s {
		return s
	}
	return s + ": " + msg
}

// entryErr is the error of name's entry in a per-name answer: "no answer" when it is
// missing, else its error (with the broker's message) or nil.
func entryErr[T any](res map[string]T, name, kind string, get func(T) (msg string, err error)) error {
	r, ok := res[name]
	if !ok {
		return errors.New("no answer for this " + kind)
	}
	if msg, err := get(r); err != nil {
		return errors.New(errWithMessage(err, msg))
	}
	return nil
}

// int32List prints ids as "1,2,3".
func int32List(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}

// keyValues parses repeated k=v flags.
type keyValues []string

func (kv *keyValues) String() string     { return strings.Join(*kv, ",") }
func (kv *keyValues) Set(s string) error { *kv = append(*kv, s); return nil }

// pairs splits each entry at its first '='.
func (kv keyValues) pairs(what string) ([][2]string, error) {
	var out [][2]string
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Sprintf("%s %q: want KEY=VALUE", what, s)}
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
