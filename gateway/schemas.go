package gateway

import (
	"encoding/json"
	"sync"

	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

// schemaCache compiles each distinct input schema once: the catalog is rebuilt whenever any
// server's tool list changes, and most schemas are then unchanged. Builds are serialised by the
// gateway; after each, retain drops what the build did not use.
type schemaCache struct {
	mu   sync.Mutex
	m    map[string]compiled // public name + schema JSON → result
	used map[string]bool
}

type compiled struct {
	schema *argschema.Schema
	err    error
}

func newSchemaCache() *schemaCache {
	return &schemaCache{m: make(map[string]compiled), used: make(map[string]bool)}
}

// compile implements CompileFunc.
func (c *schemaCache) compile(public string, schema any) (*argschema.Schema, error) {
	text, err := json.Marshal(schema)
	if err != nil {
		return argschema.Compile(public, schema, argschema.Limits{})
	}
	key := public + "\x00" + string(text)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.used[key] = true
	if r, ok := c.m[key]; ok {
		return r.schema, r.err
	}
	s, err := argschema.Compile(public, json.RawMessage(text), argschema.Limits{})
	c.m[key] = compiled{s, err}
	return s, err
}

// retain drops the schemas the last build did not use.
func (c *schemaCache) retain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.m {
		if !c.used[key] {
			delete(c.m, key)
		}
	}
	clear(c.used)
}
