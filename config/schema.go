package config

import (
	"encoding/json"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/invopop/jsonschema"
)

// JSONSchema returns the JSON Schema (draft 2020-12) of the configuration file, indented, for
// editors to validate and complete the file with. It is reflected from the types of this package,
// so it cannot drift from what Parse accepts, though Parse checks more (unique server names,
// globs, paths).
func JSONSchema() ([]byte, error) {
	r := &jsonschema.Reflector{
		// The file's keys and properties at the root, and no $id: the schema is printed by
		// `mcp-gateway schema`, not published at a URL.
		ExpandedStruct: true,
		Anonymous:      true,
		// A *yaml.Node holds a value of any shape (a scripted tool call's arguments).
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == reflect.TypeFor[yaml.Node]() || t == reflect.TypeFor[*yaml.Node]() {
				return &jsonschema.Schema{}
			}
			return nil
		},
	}
	s := r.Reflect(&Config{})
	s.Title = "mcp-gateway configuration"
	s.Description = "The YAML file read by mcp-gateway serve, agent and check."
	return json.MarshalIndent(s, "", "  ")
}

// JSONSchemaExtend says in the schema that a server has exactly one of command and url.
func (Server) JSONSchemaExtend(s *jsonschema.Schema) {
	s.OneOf = []*jsonschema.Schema{
		{Required: []string{"command"}},
		{Required: []string{"url"}},
	}
}
