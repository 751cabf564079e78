package engine

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayALeaf keeps the engine a leaf: the standard library,
// x/sys/unix, mmap-go, hdrhistogram-go, its own subpackages
// (engine/vfs...) and internal/invariants (a leaf of constants: the
// invariants build tag) only (tests included); and the codecs
// (klauspost/compress, pierrec/lz4) in compress.go only, where the log
// cleaner decompresses records.
func TestImportsStayALeaf(t *testing.T) {
	allowed := map[string]bool{
		"golang.org/x/sys/unix":                   true,
		"github.com/edsrzf/mmap-go":               true,
		"github.com/HdrHistogram/hdrhistogram-go": true,
		// A leaf of constants (the invariants build tag); it imports nothing.
		"github.com/samsa-broker/samsa/internal/invariants": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sources: %v", err)
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
			if !strings.Contains(first, ".") || allowed[p] || strings.HasPrefix(p, "github.com/samsa-broker/samsa/engine/") {
				continue
			}
			codec := strings.HasPrefix(p, "github.com/klauspost/compress/") || p == "github.com/pierrec/lz4/v4"
			if codec && (f == "compress.go" || strings.HasSuffix(f, "_test.go")) {
				continue
			}
			t.Errorf("%s imports %s", f, p)
		}
	}
}
