package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// adminHelp is the part of the transform and plugin usage texts about reaching the
// admin API.
const adminHelp = `Connecting to the admin API (every transform and plugin command):
  --admin ADDR          the broker's admin HTTP listener: HOST:PORT (plain HTTP) or
                        https://HOST:PORT (default $SLUICE_ADMIN, else 127.0.0.1:9644)
  --user NAME           log in with HTTP Basic as a broker user (or SLUICE_ADMIN_USER)
  --password PW         that user's password (or SLUICE_ADMIN_PASSWORD); other local
                        users can see it in the process list: prefer the file or the variable
  --password-file FILE  read the password from FILE (its first line)
  --tls-ca FILE         PEM CA certificates that sign the broker's certificate (https;
                        also --ca-file)
  --tls-cert FILE --tls-key FILE
                        a PEM client certificate and key (mTLS, https; also --cert
                        and --key)
A broker with authentication (modules: {auth: {use: acl}}) answers 401 without valid
credentials; reading needs Describe on the cluster, deploying or deleting Alter on the
cluster (or a super user), else 403.
`

// Environment variables holding admin API credentials (flags win).
const (
	envAdmin         = "SLUICE_ADMIN"
	envAdminUser     = "SLUICE_ADMIN_USER"
	envAdminPassword = "SLUICE_ADMIN_PASSWORD"
)

// adminFlags are the flags that say how to reach and log in to the admin API.
type adminFlags struct {
	addr  string
	cred  credFlags
	files tlsFlags
}

// register adds the admin flags to fs. The TLS files also answer to their shorter
// names (--ca-file, --cert, --key).
func (a *adminFlags) register(fs *flag.FlagSet) {
	def := os.Getenv(envAdmin)
	if def == "" {
		def = "127.0.0.1:9644"
	}
	fs.StringVar(&a.addr, "admin", def, "broker admin HTTP address: HOST:PORT or https://HOST:PORT (or $"+envAdmin+")")
	a.cred.register(fs, "admin API", envAdminUser, envAdminPassword)
	a.files.register(fs, "")
	fs.StringVar(&a.files.caFile, "ca-file", "", "the same as --tls-ca")
	fs.StringVar(&a.files.cert, "cert", "", "the same as --tls-cert")
	fs.StringVar(&a.files.key, "key", "", "the same as --tls-key")
}

// adminClient talks to one broker's admin API.
type adminClient struct {
	base       string // scheme://host:port
	user, pass string // Basic credentials when user != ""
	http       *http.Client
}

// client checks the flags (with the environment for what they leave unset) and builds
// the client. timeout bounds each request.
func (a *adminFlags) client(timeout time.Duration) (*adminClient, error) {
	c := &adminClient{http: &http.Client{Timeout: timeout}}
	addr := a.addr
	tlsOn := false
	switch {
	case strings.HasPrefix(addr, "https://"):
		tlsOn = true
	case strings.HasPrefix(addr, "http://"):
	case strings.Contains(addr, "://"):
		return nil, fmt.Errorf("--admin %q: want HOST:PORT, http://HOST:PORT or https://HOST:PORT", addr)
	default:
		addr = "http://" + addr
	}
	c.base = strings.TrimRight(addr, "/")
	if !tlsOn && a.files.set() {
		return nil, errors.New("--tls-ca, --tls-cert and --tls-key (--ca-file, --cert, --key) need an https:// admin address")
	}
	if tlsOn {
		tc, err := a.files.config()
		if err != nil {
			return nil, err
		}
		c.http.Transport = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	var err error
	c.user, c.pass, err = a.cred.resolve()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// do sends a request and returns the answer's body. A non-2xx answer is an error
// carrying the API's message; 401 and 403 say what to do about them.
func (c *adminClient) do(method, path string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the admin API at %s: %v\n  is a broker running there with its admin listener? (admin_listen, default 127.0.0.1:9644); set --admin or $%s", c.base, err, envAdmin)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return data, nil
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if c.user == "" {
			return nil, errors.New("the admin API needs credentials (HTTP 401): give --user and --password (or --password-file, or " +
				envAdminUser + " and " + envAdminPassword + "), or a client certificate with --cert and --key")
		}
		return nil, fmt.Errorf("the admin API refused the credentials of user %s (HTTP 401): check the user name and password", c.user)
	case http.StatusForbidden:
		who := "this client"
		if c.user != "" {
			who = "user " + c.user
		}
		need := "Alter"
		if method == http.MethodGet || method == http.MethodHead {
			need = "Describe"
		}
		return nil, fmt.Errorf("%s may not %s %s (HTTP 403): it needs %s on the cluster (an ACL, or a super user)", who, method, strings.SplitN(path, "?", 2)[0], need)
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return nil, fmt.Errorf("%s (HTTP %d)", e.Error, resp.StatusCode)
	}
	return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(data)))
}

// call is do that decodes a JSON answer into out (if not nil).
func (c *adminClient) call(method, path string, body io.Reader, out any) error {
	data, err := c.do(method, path, body)
	if err != nil {
		return err
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}
