package vfs

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayALeaf keeps vfs and errorfs on the standard library and
// x/sys/unix (and errorfs on vfs).
func TestImportsStayALeaf(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("errorfs/*.go")
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no sources")
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if !strings.Contains(first, ".") || p == "golang.org/x/sys/unix" || p == "github.com/samsa-broker/samsa/engine/vfs" {
				continue
			}
			t.Errorf("%s imports %s", f, p)
		}
	}
}
