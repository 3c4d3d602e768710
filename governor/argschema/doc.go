// Package argschema checks a tool call's arguments against the tool's input schema (SPEC.md §6,
// step 3) and phrases every failure so a model can fix the call in one turn.
//
// A schema is compiled once, when the tool is discovered, with [Compile]; the compiled [Schema]
// is then shared by every call. [Schema.Validate] returns one [Problem] per leaf failure, each
// with the JSON pointer of the offending value, and [Describe] turns them into the single reason
// text of an invalid_tool_arguments envelope.
//
// Schemas come from upstream servers and arguments from models and clients; both are treated as
// untrusted input:
//
//   - A reference may only point inside the same schema ("#/$defs/x", "#/definitions/x", an
//     anchor). The loader refuses every URL, so a "$ref" or "$schema" can never read a local file
//     or reach the network; such a schema fails to compile. The metaschemas of the known drafts
//     are built into the library and need no loading.
//   - The schema's size and nesting depth are capped ([Limits]) before it is decoded.
//   - A number literal longer than 64 characters or with an exponent beyond ±400, in a schema or
//     in arguments, is refused: the library would turn it into an exact rational at great cost,
//     or panic.
//   - Compile and Validate recover from a panic in the library and report it.
//
// Patterns ("pattern", "patternProperties", format "regex") are Go regular expressions (RE2):
// they run in linear time, but ECMAScript-only syntax such as lookahead makes the schema fail to
// compile, with an error that names the pattern's location.
//
// Validation is on every call's path, so valid arguments usually skip the library: Compile also
// restates a schema that uses only common keywords as a plan (fastpath.go) that checks the
// arguments' JSON text in one pass, without decoding it. The plan can only say "valid"; any
// other answer comes from the library, so Validate answers exactly as the library would.
//
// JSON Schema 2020-12 is assumed when a schema has no "$schema"; a "$schema" naming draft-04,
// -06, -07 or 2019-09 is honoured, so draft-07 tuple "items" and "definitions" work as the
// upstream meant them.
package argschema
