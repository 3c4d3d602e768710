package upstream

import (
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxIDBytes bounds the JSON-RPC id kept by a scan; a longer id is not recognised.
const maxIDBytes = 128

// span is where a member's value lies in a message: [start, end).
type span struct {
	start, end int64
	seen       bool
}

// members are the top-level members of a JSON-RPC message that a scan looks for.
const (
	memberJSONRPC = iota
	memberID
	memberMethod
	memberParams
	memberResult
	memberError
	memberCount
)

var memberNames = [memberCount]string{"jsonrpc", "id", "method", "params", "result", "error"}

// Where a scan is inside the top-level object.
const (
	stStart   = iota // before the top-level value
	stKey            // expecting a key or }
	stInKey          // inside a key
	stColon          // after a key
	stValue          // after :, expecting a value
	stInValue        // inside a member's value
	stScalar         // inside a number or literal at the top level
	stComma          // after a value, expecting , or }
	stDone           // after the top-level }
	stBad            // not an object, or broken at the top level
)

// scan finds the top-level members of a JSON-RPC message as its bytes go by, without keeping
// them: where each value lies and, kept aside, the bytes of the id (up to maxIDBytes). It reads
// a message too large to keep, to tell which call it answers, and a message kept whole, to take
// its parts without copying them. It trusts the structure below the top level: a message kept
// whole is validated before its parts are used.
type scan struct {
	off      int64
	state    int
	depth    int
	inStr    bool
	esc      bool
	key      [8]byte
	keyLen   int // -1: longer than any member name, or escaped
	member   int // the member whose value is being read; -1 for others
	members  [memberCount]span
	dup      bool // a member appeared twice
	id       []byte
	idTooBig bool
	// idRoom holds the id while it is short, as the gateway's own ids are (16 digits): no
	// allocation for it.
	idRoom [24]byte
}

func newScan() *scan {
	s := &scan{member: -1}
	s.id = s.idRoom[:0]
	return s
}

func (s *scan) feed(p []byte) {
	for i, b := range p {
		s.step(s.off+int64(i), b)
	}
	s.off += int64(len(p))
}

func (s *scan) step(pos int64, b byte) {
	if (s.state == stInValue || s.state == stScalar) && s.member == memberID {
		s.keepID(b)
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
			if s.state == stInKey {
				s.keyLen = -1
			}
		case b == '\\':
			s.esc = true
		case b == '"':
			s.inStr = false
			switch s.state {
			case stInKey:
				s.state = stColon
			case stInValue:
				if s.depth == 1 {
					s.endValue(pos + 1)
				}
			}
		case s.state == stInKey && s.keyLen >= 0:
			if s.keyLen == len(s.key) {
				s.keyLen = -1
			} else {
				s.key[s.keyLen] = b
				s.keyLen++
			}
		}
		return
	}
	space := b == ' ' || b == '\t' || b == '\r' || b == '\n'
	switch s.state {
	case stStart:
		switch {
		case space:
		case b == '{':
			s.depth, s.state = 1, stKey
		default:
			s.state = stBad
		}
	case stKey:
		switch {
		case space:
		case b == '"':
			s.inStr, s.state, s.keyLen = true, stInKey, 0
		case b == '}':
			s.depth, s.state = 0, stDone
		default:
			s.state = stBad
		}
	case stColon:
		switch {
		case space:
		case b == ':':
			s.state = stValue
			s.member = s.memberOf()
		default:
			s.state = stBad
		}
	case stValue:
		if space {
			return
		}
		if s.member >= 0 {
			if s.members[s.member].seen {
				s.dup = true
			}
			s.members[s.member] = span{start: pos, seen: true}
			if s.member == memberID {
				s.id, s.idTooBig = s.id[:0], false
				s.keepID(b)
			}
		}
		switch b {
		case '"':
			s.inStr, s.state = true, stInValue
		case '{', '[':
			s.depth++
			s.state = stInValue
		default:
			s.state = stScalar
		}
	case stScalar:
		switch {
		case space:
			s.endValue(pos)
		case b == ',':
			s.endValue(pos)
			s.state = stKey
		case b == '}':
			s.endValue(pos)
			s.depth, s.state = 0, stDone
		}
	case stInValue:
		switch b {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 1 {
				s.endValue(pos + 1)
			}
		}
	case stComma:
		switch {
		case space:
		case b == ',':
			s.state = stKey
		case b == '}':
			s.depth, s.state = 0, stDone
		default:
			s.state = stBad
		}
	case stDone:
		if !space {
			s.state = stBad
		}
	}
}

// keepID keeps a byte of the id's value; an id too long to keep is not recognised.
func (s *scan) keepID(b byte) {
	if s.idTooBig {
		return
	}
	if len(s.id) == maxIDBytes {
		s.idTooBig = true
		return
	}
	s.id = append(s.id, b)
}

func (s *scan) endValue(end int64) {
	if s.member >= 0 {
		s.members[s.member].end = end
		if s.member == memberID && !s.idTooBig {
			s.id = s.id[:end-s.members[memberID].start]
		}
	}
	s.member = -1
	s.state = stComma
}

func (s *scan) memberOf() int {
	if s.keyLen < 0 {
		return -1
	}
	for i, name := range memberNames {
		if string(s.key[:s.keyLen]) == name {
			return i
		}
	}
	return -1
}

// has reports whether the member was seen.
func (s *scan) has(m int) bool { return s.members[m].seen }

// responseID is the id of the response the scanned bytes are, if they look like one: an object
// with an id of a JSON-RPC id's type and no method. A request or notification from the server
// is not a response, and neither is a message whose id was too long to keep.
func (s *scan) responseID() (jsonrpc.ID, bool) {
	if s.has(memberMethod) || !s.has(memberID) || s.idTooBig || s.members[memberID].end == 0 {
		return jsonrpc.ID{}, false
	}
	return parseID(s.id)
}

// requestID is the id of the request from the server the scanned bytes are, if they look like
// one.
func (s *scan) requestID() (jsonrpc.ID, bool) {
	if !s.has(memberMethod) || !s.has(memberID) || s.idTooBig || s.members[memberID].end == 0 {
		return jsonrpc.ID{}, false
	}
	return parseID(s.id)
}

func parseID(raw []byte) (jsonrpc.ID, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

var errNotJSONRPC = errors.New(`not a JSON-RPC 2.0 message: it needs "jsonrpc":"2.0" and a method, or an id with a result or an error`)

// decodeMessage decodes one message kept whole, already checked to be strict JSON (no key
// twice in any object: strictjson.Validate), as the SDK would (jsonrpc.DecodeMessage) but
// without copying it: a response's result and a request's params are slices of msg. A
// top-level member given twice is refused here too, for a message not checked first.
func decodeMessage(msg []byte) (jsonrpc.Message, error) {
	s := newScan()
	s.feed(msg)
	switch {
	case s.state != stDone:
		return nil, errors.New("not a JSON object")
	case s.dup:
		return nil, errors.New("a top-level member appears twice")
	}
	part := func(m int) []byte { return msg[s.members[m].start:s.members[m].end] }
	if !s.has(memberJSONRPC) || string(part(memberJSONRPC)) != `"2.0"` {
		return nil, errNotJSONRPC
	}
	var id jsonrpc.ID
	if s.has(memberID) {
		v, ok := plainID(part(memberID))
		if !ok {
			if err := json.Unmarshal(part(memberID), &v); err != nil {
				return nil, err
			}
		}
		var err error
		if id, err = jsonrpc.MakeID(v); err != nil {
			return nil, err
		}
	}
	if s.has(memberMethod) {
		var method string
		if err := json.Unmarshal(part(memberMethod), &method); err != nil {
			return nil, errors.New("the method is not a string")
		}
		req := &jsonrpc.Request{Method: method, ID: id}
		if s.has(memberParams) {
			req.Params = part(memberParams)
		}
		return req, nil
	}
	if !id.IsValid() {
		return nil, errNotJSONRPC
	}
	resp := &jsonrpc.Response{ID: id}
	if s.has(memberResult) {
		resp.Result = part(memberResult)
	}
	if s.has(memberError) && string(part(memberError)) != "null" {
		var wire jsonrpc.Error
		if err := json.Unmarshal(part(memberError), &wire); err != nil {
			return nil, errors.New("the error is not a JSON-RPC error object")
		}
		resp.Error = &wire
	}
	return resp, nil
}

// plainID decodes the ids a call's answer carries, as encoding/json decodes them into an any:
// a whole number of at most 16 digits below 2^53 (float64, exact), which takes every id of the
// gateway's own calls (fastIDBase + n), or a string of printable ASCII without escapes. ok is
// false for any other id, which encoding/json then decodes.
func plainID(b []byte) (any, bool) {
	if len(b) == 0 {
		return nil, false
	}
	if b[0] == '"' {
		if s, rest, ok := plainString(b); ok && len(rest) == 0 {
			return s, true
		}
		return nil, false
	}
	if len(b) > 16 || (b[0] == '0' && len(b) > 1) {
		return nil, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return nil, false
		}
		n = n*10 + int64(c-'0')
	}
	if n >= 1<<53 {
		return nil, false
	}
	return float64(n), true
}
