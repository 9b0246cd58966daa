// Command stamp-producer is an inline transform that adds to every record who
// produced it: a header "sluice.principal" with the producer's principal
// ("User:alice"; "User:ANONYMOUS" for a client that did not authenticate) and a
// header "sluice.client_id" with the client id of its Produce request. Headers of
// those names that a client set are replaced, so a consumer can trust them.
//
// Deployed in derived mode it would stamp empty values: the producer of stored
// records is not known.
package main

import (
	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

// Header names the transform writes.
const (
	principalHeader = "sluice.principal"
	clientIDHeader  = "sluice.client_id"
)

func main() {
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error { return w.Write(stamp(r)) })
}

// stamp returns r with its source in the two headers, and without any other
// header of those names.
func stamp(r sdk.Record) sdk.Record {
	src := r.Source()
	hs := make([]sdk.Header, 0, len(r.Headers)+2)
	for _, h := range r.Headers {
		if h.Key != principalHeader && h.Key != clientIDHeader {
			hs = append(hs, h)
		}
	}
	r.Headers = append(hs,
		sdk.Header{Key: principalHeader, Value: []byte(src.Principal())},
		sdk.Header{Key: clientIDHeader, Value: []byte(src.ClientID)})
	return r
}
