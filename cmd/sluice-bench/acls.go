package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclsConfig is the acls command: set up ACLs for a run against an auth.acl broker.
type aclsConfig struct {
	common
	count     int    // synthetic bindings for other principals
	allowUser string // grant this user the run's topics and groups
	batch     int
}

func parseACLs(args []string, stderr io.Writer) (*aclsConfig, error) {
	c := &aclsConfig{}
	fs := newFlagSet("acls", stderr)
	brokers := c.common.register(fs)
	fs.IntVar(&c.count, "count", 0, "create this many ACLs for other principals (user-0, user-1, ...), half LITERAL and half PREFIXED topic bindings")
	fs.StringVar(&c.allowUser, "allow-user", "", "grant this user Create, Write, Read and Describe on the topics starting with --topic and the groups starting with sluice-bench")
	fs.IntVar(&c.batch, "batch", 1000, "ACLs per CreateAcls request")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.common.finish(fs, *brokers); err != nil {
		return nil, err
	}
	if c.count < 0 || c.count > 10_000_000 {
		return nil, usageErr("--count %d: want 0-10000000", c.count)
	}
	if c.count == 0 && c.allowUser == "" {
		return nil, usageErr("nothing to do: give --count or --allow-user")
	}
	if c.batch < 1 || c.batch > 100_000 {
		return nil, usageErr("--batch %d: want 1-100000", c.batch)
	}
	return c, nil
}

// runACLs creates the ACLs; the result's records are the bindings created.
func runACLs(ctx context.Context, c *aclsConfig, stderr io.Writer) (*result, error) {
	cl, err := kgo.NewClient(append(c.clientOpts(), kgo.RequestTimeoutOverhead(2*time.Minute))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res := &result{Tool: "sluice-bench", Mode: "acls", Brokers: fmt.Sprint(c.brokers), Topic: c.topic, Config: c.configMap()}
	res.Config["count"] = c.count
	create := func(b *kadm.ACLBuilder) error {
		out, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return err
		}
		for _, r := range out {
			if r.Err != nil {
				res.Errors++
				if res.FirstError == "" {
					res.FirstError = r.Err.Error()
				}
				continue
			}
			res.Records++
		}
		return nil
	}
	start := time.Now()
	if c.allowUser != "" {
		b := kadm.NewACLs().Allow("User:"+c.allowUser).AllowHosts().Topics(c.topic).Groups("sluice-bench").
			ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpCreate, kadm.OpWrite, kadm.OpRead, kadm.OpDescribe)
		if err := create(b); err != nil {
			return nil, fmt.Errorf("grant %s: %w", c.allowUser, err)
		}
	}
	for lo := 0; lo < c.count; lo += c.batch {
		hi := min(c.count, lo+c.batch)
		req := kmsg.NewPtrCreateACLsRequest()
		for i := lo; i < hi; i++ {
			// Half LITERAL, half PREFIXED; some names share the run's topic prefix, so
			// the broker's lookups for the run's topics meet them.
			name := fmt.Sprintf("team-%d-topic", i)
			if i%5 == 0 {
				name = fmt.Sprintf("%s-other-%d", c.topic, i)
			}
			cr := kmsg.NewCreateACLsRequestCreation()
			cr.ResourceType = kmsg.ACLResourceTypeTopic
			cr.ResourceName = name
			cr.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
			if i%2 == 1 {
				cr.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
			}
			cr.Principal = fmt.Sprintf("User:user-%d", i)
			cr.Host = "*"
			cr.Operation = kmsg.ACLOperationWrite
			cr.PermissionType = kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, cr)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("create ACLs: %w", err)
		}
		for _, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				res.Errors++
				if res.FirstError == "" {
					res.FirstError = err.Error()
				}
				continue
			}
			res.Records++
		}
		if c.progress > 0 {
			fmt.Fprintf(stderr, "acls: %d of %d\n", hi, c.count)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.RecordsPerSec = float64(res.Records) / res.Seconds
	}
	return res, nil
}
