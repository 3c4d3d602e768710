package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxMessage is the length, in bytes, a provider's error message is cut to when it is not one
// of the familiar shapes.
const maxMessage = 200

// providerMessage finds the error message in a provider's error body:
// {"error": {"message": ...}} (OpenAI, Anthropic and most compatible servers),
// {"error": "..."} or {"message": "..."}; for JSON of another shape, its values in order
// ("detail: bad key"), decoded; else the body's text with its \u escapes (such as \u002d)
// decoded. Either of the last two is cut to maxMessage bytes. Escapes are decoded so that the redactor sees
// a secret however the provider wrote it.
func providerMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var flat string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return decodeEscapes(nested.Message)
		case json.Unmarshal(v.Error, &flat) == nil && flat != "":
			return decodeEscapes(flat)
		case v.Message != "":
			return decodeEscapes(v.Message)
		}
	}
	s, ok := jsonValues(body)
	if !ok {
		s = decodeEscapes(string(body))
	}
	return truncateText(strings.TrimSpace(s), maxMessage)
}

// jsonValues writes the scalar values of a JSON document in order, each after its key
// ("detail: bad key; code: 401"), its strings decoded; ok is false when body is not JSON.
func jsonValues(body []byte) (string, bool) {
	if !json.Valid(body) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var parts []string
	var objects []bool // per open container: whether it is an object
	inObject := func() bool { return len(objects) > 0 && objects[len(objects)-1] }
	key, expectKey := "", false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", false
		}
		if t, ok := tok.(json.Delim); ok {
			if t == '{' || t == '[' {
				objects = append(objects, t == '{')
			} else {
				objects = objects[:len(objects)-1]
			}
			key, expectKey = "", inObject() && t != '['
			continue
		}
		if t, ok := tok.(string); ok && expectKey {
			key, expectKey = t, false
			continue
		}
		switch t := tok.(type) {
		case string:
			parts = append(parts, labelled(key, t))
		case json.Number:
			parts = append(parts, labelled(key, string(t)))
		case bool:
			parts = append(parts, labelled(key, strconv.FormatBool(t)))
		}
		key, expectKey = "", inObject()
	}
	return decodeEscapes(strings.Join(parts, "; ")), true
}

func labelled(key, value string) string {
	if key == "" {
		return value
	}
	return key + ": " + value
}

// uEscape is a \u escape of four hex digits (\u002d), as JSON and many languages write a
// character.
var uEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}(\\u[0-9a-fA-F]{4})?`)

// decodeEscapes replaces each \u escape of four hex digits in s with its character (a
// surrogate pair with the one character it encodes, a lone surrogate with U+FFFD).
func decodeEscapes(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	return uEscape.ReplaceAllStringFunc(s, func(m string) string {
		r1 := hexRune(m[2:6])
		if len(m) == 12 {
			r2 := hexRune(m[8:12])
			if utf16.IsSurrogate(r1) {
				if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
					return string(r)
				}
			}
			return one(r1) + one(r2)
		}
		return one(r1)
	})
}

func hexRune(h string) rune {
	n, _ := strconv.ParseUint(h, 16, 32) // four hex digits: cannot fail
	return rune(n)
}

// one is r as text, a lone surrogate as U+FFFD.
func one(r rune) string {
	if utf16.IsSurrogate(r) {
		return string(utf8.RuneError)
	}
	return string(r)
}
