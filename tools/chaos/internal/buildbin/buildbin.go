// Package buildbin builds the samsa binary for the harness's own tests: once per set
// of build tags per test process, into a temporary directory.
package buildbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// SrcEnv names the environment variable that points the build at another source
// tree (a module root, e.g. an export of a commit) than this module's.
const SrcEnv = "SAMSA_CHAOS_SRC"

// Samsa builds ./cmd/samsa with the given build tags (none: the build users get)
// and returns the binary's path. It builds from $SAMSA_CHAOS_SRC when set, else from
// this module's root (found with `go env GOMOD`).
func Samsa(tags ...string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	key := strings.Join(tags, ",")
	if p, ok := built[key]; ok {
		return p, nil
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "samsa-chaos-bin-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	name := "samsa"
	if key != "" {
		name += "-" + strings.ReplaceAll(key, ",", "-")
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if key != "" {
		args = append(args, "-tags", key)
	}
	cmd := exec.Command("go", append(args, "./cmd/samsa")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("buildbin: go %s: %v: %s", strings.Join(args, " "), err, b)
	}
	built[key] = out
	return out, nil
}

// Root is the module root the binaries are built from.
func Root() (string, error) {
	if src := os.Getenv(SrcEnv); src != "" {
		return filepath.Abs(src)
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("buildbin: go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
}

// Cleanup removes the built binaries (call from TestMain after the tests).
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
		built = map[string]string{}
	}
}

// SourceHasSwitch reports whether the source tree Samsa builds from defines the fault
// switch env (e.g. "SAMSA_FAULT_SKIP_FDATASYNC") in a file compiled only with the
// samsa_faults tag: the fallback for brokers that do not announce their switches.
func SourceHasSwitch(env string) (bool, error) {
	root, err := Root()
	if err != nil {
		return false, err
	}
	found := false
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		if strings.Contains(s, `"`+env+`"`) && strings.Contains(s, "//go:build samsa_faults") {
			found = true
		}
		return nil
	})
	return found, err
}
