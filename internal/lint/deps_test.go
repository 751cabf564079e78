// Package lint holds repository-wide checks that run with the ordinary test suite.
package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/samsa-broker/samsa"

// allowed lists, for each top-level area of the repository, the project areas its
// packages may import (DESIGN.md, "Dependency direction"). An area is the first path
// element under the module root, except cmd/ and tools/, whose areas are per command.
// Imports inside one's own area are always allowed.
var allowed = map[string][]string{
	"engine":          {},
	"purgatory":       {},
	"replication":     {"engine", "purgatory"},
	"coordinator":     {"engine", "replication", "purgatory"},
	"net":             {"engine", "replication", "coordinator", "purgatory", "internal"},
	"bench":           {}, // a client: it talks to brokers over the wire only
	"internal":        {},
	"cmd/samsa":       {"engine", "replication", "coordinator", "purgatory", "net", "internal"},
	"cmd/samsa-bench": {"bench"},
	// dump-log reads segment files the way the engine writes them; it uses the engine's
	// exported inspection code rather than a second parser.
	"tools/dumplog": {"engine"},
}

func area(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if (parts[0] == "cmd" || parts[0] == "tools") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

func TestDependencyDirection(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	var violations []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if !strings.Contains(filepath.ToSlash(rel), "/") {
			return nil // files at the module root
		}
		from := area(rel)
		ok, known := allowed[from]
		if !known {
			violations = append(violations, rel+": area "+from+" has no entry in the dependency rules")
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != module && !strings.HasPrefix(p, module+"/") {
				continue
			}
			to := area(strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
			if to == from || contains(ok, to) {
				continue
			}
			violations = append(violations, rel+" imports "+p+" ("+from+" may not import "+to+")")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go files found; is the test running from internal/lint?")
	}
	sort.Strings(violations)
	for _, v := range violations {
		t.Error(v)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestNoStrayRootPackages keeps the module root free of Go packages: code lives in the
// areas listed above so the dependency rules cover it.
func TestNoStrayRootPackages(t *testing.T) {
	matches, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) > 0 {
		t.Errorf("Go files at the module root: %v", matches)
	}
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("module root not where expected: %v", err)
	}
}
