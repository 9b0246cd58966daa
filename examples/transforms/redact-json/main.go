// Command redact-json is an inline transform that masks one field of JSON
// record values, wherever it occurs (in nested objects and arrays too).
// Values that are not JSON, or do not contain the field, pass through
// unchanged.
//
// The field is the REDACT_FIELD environment variable of the deployment
// ("ssn" when unset); its value becomes the string "***".
package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

const (
	defaultField = "ssn"
	mask         = "***"
)

func main() {
	field := os.Getenv("REDACT_FIELD")
	if field == "" {
		field = defaultField
	}
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error {
		r.Value = redact(r.Value, field)
		return w.Write(r)
	})
}

// redact returns value with every member named field of every JSON object in
// it replaced by the mask. It returns value itself if it is not valid JSON or
// has no such member. Member order is kept; whitespace is not.
func redact(value []byte, field string) []byte {
	quoted, _ := json.Marshal(field)
	// Fast path: a value that cannot contain the member (its name, possibly
	// with escapes, would appear as a quoted string) is left alone.
	if !bytes.Contains(value, quoted[1:len(quoted)-1]) && !bytes.Contains(value, []byte(`\`)) {
		return value
	}
	if !json.Valid(value) {
		return value
	}
	out, changed, err := rewrite(value, field)
	if err != nil || !changed {
		return value
	}
	return out
}

// frame is one open JSON container while rewriting.
type frame struct {
	object    bool
	expectKey bool // in an object: the next token is a member name
	count     int  // elements or members written so far
}

// rewrite re-encodes value token by token, replacing the values of members
// named field.
func rewrite(value []byte, field string) ([]byte, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	var out bytes.Buffer
	var stack []frame
	changed := false
	skip := 0 // > 0 while skipping a redacted composite value: its depth

	// beforeValue writes the separator due before a value (or member name)
	// in the current container.
	beforeValue := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.object && !top.expectKey {
			out.WriteByte(':')
			top.expectKey = true
			return
		}
		if top.count > 0 {
			out.WriteByte(',')
		}
		top.count++
		if top.object {
			top.expectKey = false
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out.Bytes(), changed, nil
		}
		if err != nil {
			return nil, false, err
		}
		if skip > 0 {
			if d, ok := tok.(json.Delim); ok {
				if d == '{' || d == '[' {
					skip++
				} else {
					skip--
				}
			}
			continue
		}
		// A member name that matches: write it and the mask, then skip its value.
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				out.WriteByte('}')
				continue
			}
			name, _ := tok.(string)
			beforeValue()
			writeString(&out, name)
			if name == field {
				beforeValue()
				writeString(&out, mask)
				changed = true
				// The value's first token decides what to skip.
				v, err := dec.Token()
				if err != nil {
					return nil, false, err
				}
				if d, ok := v.(json.Delim); ok && (d == '{' || d == '[') {
					skip = 1
				}
			}
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				beforeValue()
				out.WriteByte(byte(t))
				stack = append(stack, frame{object: t == '{', expectKey: t == '{'})
			default: // ']' ('}' is handled with member names)
				stack = stack[:len(stack)-1]
				out.WriteByte(byte(t))
			}
		case string:
			beforeValue()
			writeString(&out, t)
		case json.Number:
			beforeValue()
			out.WriteString(string(t))
		case bool:
			beforeValue()
			if t {
				out.WriteString("true")
			} else {
				out.WriteString("false")
			}
		case nil:
			beforeValue()
			out.WriteString("null")
		}
	}
}

func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // cannot fail for a string
	out.Truncate(out.Len() - 1) // Encode adds a newline
}
