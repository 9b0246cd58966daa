package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientOpts are the options every client of a run shares.
func (c *common) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ClientID(c.clientID),
		kgo.RetryTimeout(30 * time.Second),
	}, c.sec.opts...)
}

// setupTopic creates the topic unless it exists (or --no-create) and waits until every
// partition has a leader. It returns the number of partitions.
func setupTopic(ctx context.Context, c *common) (int, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if !c.noCreate {
		resp, err := adm.CreateTopic(ctx, int32(c.partitions), int16(c.rf), c.topicConfig, c.topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return 0, fmt.Errorf("create topic %s: %w", c.topic, err)
		}
	}
	for {
		tds, err := adm.ListTopics(ctx, c.topic)
		if err == nil {
			td := tds[c.topic]
			if td.Err == nil && len(td.Partitions) > 0 {
				ready := true
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
					}
				}
				if ready {
					return len(td.Partitions), nil
				}
			}
			if td.Err != nil {
				err = td.Err
			} else {
				err = errors.New("partitions without a leader")
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("topic %s not ready: %w (last: %v)", c.topic, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// payload hands out record values: windows of one buffer of random letters (like
// Kafka's producer perf test), so producing costs no allocation and no generation, and
// compression sees realistic text rather than zeros.
type payload struct {
	buf  []byte
	size int
}

const payloadSpan = 64 << 10 // distinct starting offsets

func newPayload(size int) *payload {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, size+payloadSpan)
	for i := range buf {
		buf[i] = byte('A' + r.IntN(26))
	}
	return &payload{buf: buf, size: size}
}

// value returns record i's value; callers must not write to it.
func (p *payload) value(i int64) []byte {
	off := int((uint64(i) * 7919) % payloadSpan)
	return p.buf[off : off+p.size : off+p.size]
}

// keys is a pool of n random 8-byte keys (--keys; distinct but for a 2^-64 chance), so keyed records spread over
// partitions by their hash without a key allocation per record.
type keys [][]byte

func newKeys(n int) keys {
	r := rand.New(rand.NewPCG(3, 4))
	backing := make([]byte, 8*n)
	k := make(keys, n)
	for i := range k {
		binary.BigEndian.PutUint64(backing[8*i:], r.Uint64())
		k[i] = backing[8*i : 8*i+8 : 8*i+8]
	}
	return k
}

func (k keys) key(i int64) []byte { return k[uint64(i)%uint64(len(k))] }

func (c *common) configMap() map[string]any {
	m := map[string]any{}
	if c.durationSet || c.duration > 0 {
		m["duration"] = c.duration.String()
	}
	if c.records > 0 {
		m["records"] = c.records
	}
	if len(c.topicConfig) > 0 {
		tc := map[string]string{}
		for k, v := range c.topicConfig {
			tc[k] = *v
		}
		m["topic_config"] = tc
	}
	c.sec.addConfig(m)
	return m
}

func (p *producerFlags) addConfig(m map[string]any) {
	m["record_size"] = p.recordSize
	m["keyed"] = p.keyed
	m["acks"] = p.acksName
	m["linger"] = p.linger.String()
	m["batch_size"] = p.batchSize
	m["max_buffered_records"] = p.maxBuffered
	m["compression"] = p.compression
	m["idempotence"] = p.idempotent
	if p.keyed {
		m["keys"] = p.keys
	}
}

func brokersString(b []string) string { return strings.Join(b, ",") }
