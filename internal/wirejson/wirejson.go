// Package wirejson encodes JSON the way the MCP SDK writes its messages: encoding/json without
// HTML escaping and without a trailing newline. The gateway's own paths for tools/call (the
// fast paths, docs/design.md) write what the SDK would write, byte for byte, with it.
package wirejson

import (
	"bytes"
	"encoding/json"
)

// Append appends the encoding of v to b. On an error b holds what was there before, and maybe
// part of v's encoding: the caller discards b.
func Append(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// Marshal is the encoding of v.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := Append(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
