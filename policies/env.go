package policies

import (
	"path"
	"slices"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// CEL type names of the structured variables, as type errors print them.
const (
	principalType = "Principal"
	sessionType   = "Session"
	toolMetaType  = "ToolMeta"
	stateType     = "State"
	rateType      = "Rate"
	countsType    = "RateCounts"
)

// variables are the rule variables of SPEC.md §8 and their CEL types, in the order they are
// declared.
var variables = []struct {
	name string
	typ  *cel.Type
}{
	{"tool", cel.StringType},
	{"server", cel.StringType},
	{"upstream_tool", cel.StringType},
	{"args", cel.MapType(cel.StringType, cel.DynType)},
	{"principal", cel.ObjectType(principalType)},
	{"session", cel.ObjectType(sessionType)},
	{"tool_meta", cel.ObjectType(toolMetaType)},
	{"labels", cel.MapType(cel.StringType, cel.BoolType)},
	{"state", cel.ObjectType(stateType)},
	{"rate", cel.ObjectType(rateType)},
	{"now", cel.TimestampType},
}

// variableNames are the names of variables.
var variableNames = func() []string {
	names := make([]string, len(variables))
	for i, v := range variables {
		names[i] = v.name
	}
	return names
}()

// newEnv declares the variables and helpers of SPEC.md §8; only the variables named in only
// when it is not nil (Options.Variables). The structured variables are Go structs registered
// as CEL object types, so a misspelt field (principal.role) is a type error at load rather than
// a rule that fails at every call.
func newEnv(only []string) (*cel.Env, error) {
	tags := types.ParseStructTags(true)
	opts := []cel.EnvOption{
		cel.OptionalTypes(),
		cel.Types(
			cel.NativeTypeFor[Principal](tags, types.NativeTypeAlias(principalType)),
			cel.NativeTypeFor[Session](tags, types.NativeTypeAlias(sessionType)),
			cel.NativeTypeFor[ToolMeta](tags, types.NativeTypeAlias(toolMetaType)),
			cel.NativeTypeFor[State](tags, types.NativeTypeAlias(stateType)),
			cel.NativeTypeFor[Rate](tags, types.NativeTypeAlias(rateType)),
			cel.NativeTypeFor[RateCounts](tags, types.NativeTypeAlias(countsType)),
		),
		cel.Function("glob",
			cel.Overload("glob_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(glob))),
	}
	for _, v := range variables {
		if only == nil || slices.Contains(only, v.name) {
			opts = append(opts, cel.Variable(v.name, v.typ))
		}
	}
	return cel.NewEnv(opts...)
}

// glob reports whether s matches the shell pattern, with path.Match semantics: `*` and `?` do not
// match `/`. A malformed pattern is an evaluation error (and, when the pattern is a literal, a
// load error).
func glob(pattern, s ref.Val) ref.Val {
	p, ok := pattern.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(pattern)
	}
	str, ok := s.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(s)
	}
	matched, err := path.Match(string(p), string(str))
	if err != nil {
		return types.NewErr("glob: malformed pattern %q", string(p))
	}
	return types.Bool(matched)
}

// sizeEstimator bounds the size of everything a call carries at AssumedMaxSize, so the static
// cost estimate is finite; without a bound every string function and comprehension over the
// arguments would estimate as unbounded.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) == 0 {
		return nil
	}
	return &cost.SizeEstimate{Min: 0, Max: AssumedMaxSize}
}

func (sizeEstimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}
