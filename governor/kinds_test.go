package governor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// Kinds lists every failure kind declared in kinds.go, once.
func TestKindsListsEveryKind(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kinds.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			for _, name := range vs.Names {
				declared++
				lit := vs.Values[0].(*ast.BasicLit).Value
				if !slices.Contains(Kinds, Kind(lit[1:len(lit)-1])) {
					t.Errorf("%s (%s) is not in Kinds", name.Name, lit)
				}
			}
		}
	}
	if declared != len(Kinds) {
		t.Errorf("kinds.go declares %d kinds, Kinds lists %d", declared, len(Kinds))
	}
}
