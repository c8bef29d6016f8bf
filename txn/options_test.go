package txn_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/txn"
)

// TestOptions: txn.Options defaults and validates as the Session it builds
// does, and Validate leaves its receiver alone.
func TestOptions(t *testing.T) {
	o := (&txn.Options{}).EnsureDefaults()
	require.Equal(t, 10*time.Second, o.TransactionTimeout)
	require.Equal(t, 45*time.Second, o.SessionTimeout)
	require.Equal(t, 60*time.Second, o.RebalanceTimeout)
	require.Equal(t, 1, o.Pipeline)

	valid := txn.Options{Brokers: []string{"127.0.0.1:1"}, Group: "g", InstanceID: "i", Topics: []string{"in"}}
	require.NoError(t, valid.Validate())
	for name, bad := range map[string]func(*txn.Options){
		"InstanceID": func(o *txn.Options) { o.InstanceID = "" },
		"Pipeline":   func(o *txn.Options) { o.Pipeline = txn.MaxPipeline + 1 },
		"protocol":   func(o *txn.Options) { o.GroupProtocol = "eager" },
	} {
		o := valid
		bad(&o)
		require.ErrorIs(t, o.Validate(), txn.ErrInvalidOptions, name)
		_, err := txn.NewSession(o)
		require.ErrorIs(t, err, txn.ErrInvalidOptions, name)
		require.Zero(t, txn.ClassOf(err), name)
	}
	o = &txn.Options{Pipeline: txn.MaxPipeline + 1}
	_ = o.Validate()
	require.Equal(t, txn.MaxPipeline+1, o.Pipeline, "Validate changed its receiver")
}

// TestExported: txn exports what a loop of its own needs and no more; the
// instance ID's ownership that only the processor drives (claims checked
// against the coordinator, yields, holder waits) is internal/txncore's
// (issue 35). A new export is a decision: add it here.
func TestExported(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var got []string
	for name, f := range pkgs["txn"].Files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					typ := d.Recv.List[0].Type
					if st, ok := typ.(*ast.StarExpr); ok {
						typ = st.X
					}
					name = typ.(*ast.Ident).Name + "." + name
				}
				got = append(got, name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							got = append(got, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								got = append(got, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	require.Equal(t, []string{
		"Class", "ClassAbortable", "ClassFenced", "ClassOf", "ClassOutcomeUnknown", "ClassReset",
		"ErrFenced", "ErrInvalidOptions", "ErrOutcomeUnknown", "ErrPipelineFull",
		"Error", "GroupProtocol", "GroupProtocolClassic", "GroupProtocolConsumer",
		"ID", "MaxPipeline", "NewSession", "Options", "Options.EnsureDefaults", "Options.Validate",
		"RingID", "Session", "Session.AllowRebalance", "Session.Begin", "Session.CheckFenced",
		"Session.Claim", "Session.Client", "Session.Close", "Session.CloseAndLeave",
		"Session.Pipeline", "Session.Poll", "Session.Rewind", "Session.RewindPartitions",
		"Txn", "Txn.Abort", "Txn.Commit", "Txn.Flush", "Txn.FlushFailed", "Txn.Produce",
		"Txn.TransactionalID",
	}, got)
}
