package quotas

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/modules/quotas/quota"
)

// Namespace is the metadata extension namespace of client quotas: one record per
// entity with quotas.
//
// Key: hex(sha256(quota.Entity.Key())), 64 characters (entity names may be longer than
// an extension key may be). Value: a JSON object, version 1:
//
//	{"v": 1,
//	 "entity": [{"type": "user", "name": "alice"}, {"type": "client-id", "default": true}],
//	 "quotas": {"producer_byte_rate": 1048576}}
//
// Frozen: version 1 is read forever; a new field is added under a new "v". A value that
// does not decode (a newer version, corruption) is skipped and logged, never fatal.
const Namespace = "quotas"

// storedVersion is the version of the values this code writes.
const storedVersion = 1

type storedComponent struct {
	Type    string `json:"type"`
	Name    string `json:"name,omitempty"`
	Default bool   `json:"default,omitempty"`
}

type storedValue struct {
	V      int                `json:"v"`
	Entity []storedComponent  `json:"entity"`
	Quotas map[string]float64 `json:"quotas"`
}

// errStoredVersion: a stored value of a version this broker does not read.
var errStoredVersion = errors.New("quotas: unknown stored version")

// storageKey is e's extension key.
func storageKey(e quota.Entity) string {
	sum := sha256.Sum256([]byte(e.Key()))
	return hex.EncodeToString(sum[:])
}

// encodeStored is the extension value of e with vals.
func encodeStored(e quota.Entity, vals quota.Values) ([]byte, error) {
	v := storedValue{V: storedVersion, Quotas: map[string]float64(vals)}
	for _, c := range e.Components() {
		v.Entity = append(v.Entity, storedComponent{Type: c.Type, Name: c.Name, Default: c.Default})
	}
	return json.Marshal(v)
}

// decodeStored decodes an extension value; the entity must hash to key.
func decodeStored(key string, b []byte) (quota.Entry, error) {
	var v storedValue
	if err := json.Unmarshal(b, &v); err != nil {
		return quota.Entry{}, fmt.Errorf("quota record %s: %w", key, err)
	}
	if v.V != storedVersion {
		return quota.Entry{}, fmt.Errorf("quota record %s version %d: %w", key, v.V, errStoredVersion)
	}
	cs := make([]quota.Component, 0, len(v.Entity))
	for _, c := range v.Entity {
		cs = append(cs, quota.Component{Type: c.Type, Name: c.Name, Default: c.Default})
	}
	e, err := quota.NewEntity(cs...)
	if err != nil {
		return quota.Entry{}, fmt.Errorf("quota record %s: %w", key, err)
	}
	if storageKey(e) != key {
		return quota.Entry{}, fmt.Errorf("quota record %s names entity %s, whose key differs", key, e)
	}
	return quota.Entry{Entity: e, Values: quota.Values(v.Quotas)}, nil
}

// buildSet builds the quota set of an image's namespace map; undecodable values are
// reported to bad and left out.
func buildSet(ns map[string][]byte, bad func(key string, err error)) *quota.Set {
	entries := make([]quota.Entry, 0, len(ns))
	for k, b := range ns {
		e, err := decodeStored(k, b)
		if err == nil {
			for key, v := range e.Values {
				if err = quota.ValidateValue(e.Entity, key, v); err != nil {
					break
				}
			}
		}
		if err != nil {
			bad(k, err)
			continue
		}
		entries = append(entries, e)
	}
	s, err := quota.FromEntries(entries)
	if err != nil { // entries were checked one by one: not expected
		bad("", err)
		return &quota.Set{}
	}
	return s
}

// sameMap reports whether two maps are the same map (not merely equal): an image that
// did not touch the namespace shares its map with the previous one.
func sameMap(x, y map[string][]byte) bool {
	return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
}
