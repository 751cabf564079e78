package quorum

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// LegacyAsideSuffix names where ImportLegacyStore's Done moves the files of an
// imported single-node store: the directory with this suffix, beside it.
const LegacyAsideSuffix = ".pre-raft"

// LegacyImport is what ImportLegacyStore found.
type LegacyImport struct {
	// Records rebuild the single-node store's image; pass them as
	// Config.BootstrapRecords. Nil when there is nothing to import (no legacy
	// store, or the raft log already exists).
	Records []metadata.Record
	// Offset is the number of records in the legacy log (its next offset).
	Offset int64

	legacyDir, raftDir string
	found              bool     // a legacy store is there (imported now or before)
	files              []string // legacy files to move aside (same-directory case)
	log                *slog.Logger
}

// ImportLegacyStore reads the single-node metadata store (coordinator/metadata.Store,
// files NNN.log and NNN.snapshot) in legacyDir, to be imported into a fresh raft
// log in raftDir (metadata.log.dir; often the same directory, <data.dir>/meta).
//
// The wiring of a first start on raft is:
//
//	imp, err := quorum.ImportLegacyStore(legacyDir, raftDir, log)
//	st, err := quorum.OpenDiskStorage(raftDir, quorum.DiskOptions{LegacyImported: imp.Found()})
//	cfg.BootstrapRecords = imp.Records
//	q, err := quorum.New(cfg, st, tr) // the bootstrap snapshot holds the records
//	err = imp.Done()                    // the old files move aside
//
// Nothing is deleted. Done renames legacyDir to legacyDir+LegacyAsideSuffix, or,
// when the raft log shares the directory, moves the legacy files into that
// directory. A crash anywhere is safe: before the bootstrap snapshot is durable the
// next start imports again; after it, the raft log exists, Records is nil, and Done
// finishes moving the files. A legacy store that does not replay (corrupt) is an
// error: nothing is imported and nothing moved. OpenDiskStorage refuses a fresh
// directory holding a legacy store unless told it was imported
// (DiskOptions.LegacyImported), so forgetting this step cannot lose metadata.
func ImportLegacyStore(legacyDir, raftDir string, lg *slog.Logger) (*LegacyImport, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	li := &LegacyImport{legacyDir: legacyDir, raftDir: raftDir, log: lg}
	files, err := legacyFiles(legacyDir)
	if err != nil || len(files) == 0 {
		return li, err
	}
	li.found = true
	if filepath.Clean(legacyDir) == filepath.Clean(raftDir) {
		li.files = files
	}
	bootstrapped, err := hasRaftLog(raftDir)
	if err != nil {
		return nil, err
	}
	if bootstrapped {
		return li, nil // imported before; Done finishes the move
	}
	st, err := metadata.OpenStore(legacyDir, metadata.StoreOptions{Logger: lg})
	if err != nil {
		return nil, fmt.Errorf("quorum: reading the single-node metadata store in %s: %w", legacyDir, err)
	}
	li.Records, li.Offset = st.Image().Records(), st.Offset()
	if err := st.Close(); err != nil {
		return nil, fmt.Errorf("quorum: closing the single-node metadata store: %w", err)
	}
	if li.Records == nil {
		li.Records = []metadata.Record{} // found, but empty: still moved aside
	}
	lg.Info("single-node metadata store read for import into the raft log", "dir", legacyDir,
		"records", len(li.Records), "offset", li.Offset)
	return li, nil
}

// Found reports whether a single-node store was found (imported now or before):
// pass it as DiskOptions.LegacyImported.
func (li *LegacyImport) Found() bool { return li.found }

// Done moves the imported store aside; call it once the raft log is bootstrapped.
// It is a no-op when nothing was found.
func (li *LegacyImport) Done() error {
	if !li.found {
		return nil
	}
	aside := filepath.Clean(li.legacyDir) + LegacyAsideSuffix
	if li.files == nil {
		if _, err := os.Stat(aside); err == nil {
			return fmt.Errorf("quorum: cannot move %s aside: %s exists", li.legacyDir, aside)
		}
		if err := os.Rename(li.legacyDir, aside); err != nil {
			return fmt.Errorf("quorum: moving the imported store aside: %w", err)
		}
		return syncParent(aside)
	}
	if err := os.MkdirAll(aside, 0o755); err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	for _, name := range li.files {
		if err := os.Rename(filepath.Join(li.legacyDir, name), filepath.Join(aside, name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("quorum: moving the imported store aside: %w", err)
		}
	}
	if err := syncDirPath(aside); err != nil {
		return err
	}
	li.log.Info("imported single-node metadata store moved aside", "to", aside, "files", len(li.files))
	return syncDirPath(li.legacyDir)
}

// legacyFiles lists a metadata.Store's log and snapshot files in dir.
func legacyFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("quorum: %w", err)
	}
	var out []string
	for _, de := range des {
		for _, suffix := range []string{".log", ".snapshot"} {
			stem, ok := strings.CutSuffix(de.Name(), suffix)
			if !ok || len(stem) != 20 {
				continue
			}
			if _, err := strconv.ParseUint(stem, 10, 64); err == nil {
				out = append(out, de.Name())
			}
		}
	}
	return out, nil
}

// hasRaftLog reports whether dir holds a raft snapshot (a bootstrapped log).
func hasRaftLog(dir string) (bool, error) {
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("quorum: %w", err)
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), snapSuffix) {
			return true, nil
		}
	}
	return false, nil
}

func syncParent(path string) error { return syncDirPath(filepath.Dir(path)) }

func syncDirPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("quorum: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("quorum: sync %s: %w", dir, err)
	}
	return nil
}
