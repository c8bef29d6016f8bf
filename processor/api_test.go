package processor_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.txt from the package's exported declarations")

// TestExported pins processor's exported API: every exported name with
// its declaration (signatures, struct fields, interface methods, without
// comments), sorted. A restructure of the package must leave it as it is;
// a change to the API is a decision: run the test with -update-api and
// commit testdata/api.txt with the change.
func TestExported(t *testing.T) {
	got := strings.Join(exportedDecls(t, "."), "\n") + "\n"
	if *updateAPI {
		require.NoError(t, os.WriteFile("testdata/api.txt", []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile("testdata/api.txt")
	require.NoError(t, err)
	require.Equal(t, string(want), got, "the exported API changed (rerun with -update-api if that is the intent)")
}

// exportedDecls prints each exported declaration of the package in dir,
// one per entry: functions and methods without bodies, types without
// unexported struct fields, constants and variables by name.
func exportedDecls(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.SkipObjectResolution)
	require.NoError(t, err)
	print := func(n any) string {
		var b bytes.Buffer
		require.NoError(t, printer.Fprint(&b, fset, n))
		return strings.Join(strings.Fields(b.String()), " ")
	}
	var out []string
	for _, f := range pkgs["processor"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				d.Doc, d.Body = nil, nil
				if d.Recv != nil {
					d.Recv.List[0].Names = nil // a receiver's name is no part of the API
				}
				out = append(out, print(d))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						s.Doc, s.Comment = nil, nil
						if st, ok := s.Type.(*ast.StructType); ok {
							st.Fields.List = slices.DeleteFunc(st.Fields.List, func(f *ast.Field) bool {
								return len(f.Names) == 0 || !f.Names[0].IsExported()
							})
							for _, f := range st.Fields.List {
								f.Doc, f.Comment = nil, nil
							}
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								m.Doc, m.Comment = nil, nil
							}
						}
						out = append(out, "type "+print(s))
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, d.Tok.String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func exportedRecv(fl *ast.FieldList) bool {
	typ := fl.List[0].Type
	if st, ok := typ.(*ast.StarExpr); ok {
		typ = st.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
