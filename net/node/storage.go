package node

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// ErrStorage is wrapped by every refusal to start on (or format) a directory: not
// formatted, formatted for another cluster or node, or unreadable.
var ErrStorage = errors.New("storage")

// MetaPropertiesFile is the name of the file identifying a formatted directory.
const MetaPropertiesFile = "meta.properties"

// maxMetaPropertiesSize bounds what is read of a meta.properties file.
const maxMetaPropertiesSize = 64 << 10

// MetaProperties is the content of meta.properties, Kafka's version 1 format (KRaft):
//
//	#
//	#<date>
//	cluster.id=<22-character base64url UUID>
//	directory.id=<22-character base64url UUID, unique per directory>
//	node.id=<node id>
//	version=1
//
// Single-node data directories of earlier Samsa versions hold <data.dir>/meta.properties
// with version, cluster.id and node.id only; Start adopts them (see checkStorage).
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID string // "" in files written before directory ids
}

// RandomUUID returns a new random id in Kafka's text form (22 characters of base64url
// without padding), as `kafka-storage.sh random-uuid` prints.
func RandomUUID() string { return metadata.NewUUID().String() }

// ValidClusterID checks a cluster id as kafka-storage.sh does: a UUID in Kafka's text
// form.
func ValidClusterID(id string) error {
	u, err := metadata.ParseUUID(id)
	if err != nil || u == metadata.ZeroUUID {
		return fmt.Errorf("%w: cluster id %q is not a valid UUID in Kafka's form (22 characters of base64url, e.g. from `samsa storage random-uuid`)", ErrStorage, id)
	}
	return nil
}

// ReadMetaProperties reads dir/meta.properties. A missing file is an error satisfying
// errors.Is(err, os.ErrNotExist).
func ReadMetaProperties(dir string) (MetaProperties, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	if st, err := os.Stat(path); err != nil {
		return MetaProperties{}, err
	} else if st.Size() > maxMetaPropertiesSize {
		return MetaProperties{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrStorage, path, maxMetaPropertiesSize)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return MetaProperties{}, err
	}
	kv := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return MetaProperties{}, fmt.Errorf("%w: %s: line %q is not key=value", ErrStorage, path, line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	var mp MetaProperties
	if mp.Version, err = strconv.Atoi(kv["version"]); err != nil || (mp.Version != 0 && mp.Version != 1) {
		return MetaProperties{}, fmt.Errorf("%w: %s: version %q (want 1)", ErrStorage, path, kv["version"])
	}
	if mp.ClusterID = kv["cluster.id"]; mp.ClusterID == "" {
		return MetaProperties{}, fmt.Errorf("%w: %s has no cluster.id", ErrStorage, path)
	}
	id, ok := kv["node.id"]
	if !ok && mp.Version == 0 {
		id, ok = kv["broker.id"]
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if !ok || err != nil || n < 0 {
		return MetaProperties{}, fmt.Errorf("%w: %s: node.id %q", ErrStorage, path, id)
	}
	mp.NodeID = int32(n)
	mp.DirectoryID = kv["directory.id"]
	return mp, nil
}

// WriteMetaProperties writes dir/meta.properties (creating dir) durably: a temporary
// file, fsynced, renamed, and the directory synced.
func WriteMetaProperties(dir string, mp MetaProperties) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	lines := []string{
		"cluster.id=" + mp.ClusterID,
		"node.id=" + strconv.Itoa(int(mp.NodeID)),
		"version=" + strconv.Itoa(mp.Version),
	}
	if mp.DirectoryID != "" {
		lines = append(lines, "directory.id="+mp.DirectoryID)
	}
	sort.Strings(lines)
	body := "#\n#" + time.Now().UTC().Format(time.UnixDate) + "\n" + strings.Join(lines, "\n") + "\n"
	path := filepath.Join(dir, MetaPropertiesFile)
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(body)); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return syncDir(dir)
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrStorage, dir, err)
	}
	return nil
}

// FormatResult says what Format did with one directory.
type FormatResult struct {
	Dir string
	// Skipped: the directory was already formatted for this cluster and node
	// (--ignore-formatted).
	Skipped bool
	// Bootstrap: the bootstrap records (the feature levels, and FormatOptions'
	// Bootstrap) were written into it (bootstrap.go): the metadata dir of a
	// controller.
	Bootstrap bool
	// DirectoryID is the directory.id written (empty when Skipped).
	DirectoryID string
}

// FormatOptions are Format's options beyond the cluster id.
type FormatOptions struct {
	// IgnoreFormatted skips directories already formatted for this cluster and node.
	IgnoreFormatted bool
	// Bootstrap are records the metadata log starts with (bootstrap.go; --add-scram's
	// credentials), written into a controller's metadata dir after the feature
	// levels; a broker-only node has no use for them and writes none.
	Bootstrap []metadata.Record
	// Features are the feature levels the metadata log starts with
	// (bootstrap_features.go); nil: BootstrapFeatures' defaults for cfg (the newest
	// release, samsa.transaction.version where cfg sets it).
	Features map[string]int16
	// Quorum makes a controller's quorum dynamic (quorum_dynamic.go: --standalone,
	// --initial-controllers, --no-initial-controllers); the zero value, static.
	Quorum QuorumFormat
}

// Format writes meta.properties (version 1, a new directory.id each) into every log
// dir and the metadata dir of cfg, for cluster clusterID, as `kafka-storage.sh format`
// does. A directory already formatted is an error, unless ignoreFormatted, which skips
// it when it belongs to the same cluster and node (another cluster's or node's
// directory is refused either way: the node could not start on it). Nothing is written
// when any directory is refused.
func Format(cfg *Config, clusterID string, ignoreFormatted bool) ([]FormatResult, error) {
	return FormatWith(cfg, clusterID, FormatOptions{IgnoreFormatted: ignoreFormatted})
}

// FormatWith is Format with bootstrap records (FormatOptions).
func FormatWith(cfg *Config, clusterID string, o FormatOptions) ([]FormatResult, error) {
	ignoreFormatted := o.IgnoreFormatted
	if err := ValidClusterID(clusterID); err != nil {
		return nil, err
	}
	if err := checkQuorumFormat(cfg, o.Quorum); err != nil {
		return nil, err
	}
	dirs := cfg.Dirs()
	dirIDs := make([]metadata.UUID, len(dirs))
	for i, d := range dirs {
		dirIDs[i] = metadata.NewUUID()
		if filepath.Clean(d) != filepath.Clean(cfg.MetadataDir) {
			continue
		}
		for _, c := range o.Quorum.InitialControllers {
			if c.ID == cfg.NodeID {
				dirIDs[i] = c.DirectoryID // the metadata dir is the voter's directory
			}
		}
	}
	var boot []metadata.Record
	if cfg.Roles.Controller {
		levels := maps.Clone(o.Features)
		if levels == nil {
			var err error
			if levels, err = BootstrapFeatures(cfg, "", nil); err != nil {
				return nil, err
			}
		}
		// kraft.version is the quorum's: 1 for a dynamic one, 0 for a static one
		// (BootstrapFeatures' default; Kafka's format does the same).
		if o.Quorum.Dynamic() {
			levels[metadata.FeatureKRaftVersion] = 1
		} else if levels[metadata.FeatureKRaftVersion] > 0 {
			return nil, fmt.Errorf("%w: kraft.version %d is a dynamic quorum: format it with --standalone, --initial-controllers or --no-initial-controllers (and controller.quorum.bootstrap.servers), or raise the level later with samsa features upgrade --feature kraft.version=1",
				ErrConfig, levels[metadata.FeatureKRaftVersion])
		}
		boot = FeatureRecords(cfg, levels)
		metaID := dirIDs[slices.IndexFunc(dirs, func(d string) bool { return filepath.Clean(d) == filepath.Clean(cfg.MetadataDir) })]
		vr, err := formatVoters(cfg, o.Quorum, metaID)
		if err != nil {
			return nil, err
		}
		if vr != nil {
			boot = append(boot, vr)
		}
		boot = append(boot, o.Bootstrap...)
	}
	res := make([]FormatResult, len(dirs))
	for i, d := range dirs {
		res[i].Dir = d
		mp, err := ReadMetaProperties(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := checkEmptyish(d); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		case !ignoreFormatted:
			return nil, fmt.Errorf("%w: log directory %s is already formatted (cluster %s, node %d); use --ignore-formatted to ignore this directory and format the others", ErrStorage, d, mp.ClusterID, mp.NodeID)
		case mp.ClusterID != clusterID:
			return nil, fmt.Errorf("%w: %s is formatted for cluster %s, not %s: it is another cluster's directory", ErrStorage, d, mp.ClusterID, clusterID)
		case mp.NodeID != cfg.NodeID:
			return nil, fmt.Errorf("%w: %s is formatted for node.id %d, the configuration's node.id is %d", ErrStorage, d, mp.NodeID, cfg.NodeID)
		}
		res[i].Skipped = true
	}
	for i := range res {
		r := &res[i]
		if r.Skipped {
			continue
		}
		r.DirectoryID = dirIDs[i].String()
		if cfg.Roles.Controller && filepath.Clean(r.Dir) == filepath.Clean(cfg.MetadataDir) {
			if err := writeBootstrap(r.Dir, boot); err != nil { // before meta.properties: a formatted dir has its bootstrap
				return nil, err
			}
			r.Bootstrap = true
		}
		if err := WriteMetaProperties(r.Dir, MetaProperties{Version: 1, ClusterID: clusterID, NodeID: cfg.NodeID, DirectoryID: r.DirectoryID}); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkEmptyish refuses to format a directory that holds data but no meta.properties
// (a directory of a Samsa version before formatting is adopted at start instead).
func checkEmptyish(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	for _, e := range ents {
		if e.Name() != "lost+found" && !strings.HasPrefix(e.Name(), ".") {
			return fmt.Errorf("%w: %s is not empty and has no meta.properties: not formatting over data (start the node on it to adopt a single-node directory of an earlier version, or empty it)", ErrStorage, dir)
		}
	}
	return nil
}

// checkStorage verifies that cfg's directories are formatted for one cluster and this
// node, before anything else opens them, and returns the cluster id. It:
//   - adopts a single-node data directory of an earlier version
//     (<data.dir>/meta.properties with cluster.id and node.id): its ids are written
//     into every directory;
//   - formats a fresh node that is a combined node and the only voter (`make run`);
//   - formats a log dir added empty to a formatted node (Kafka does too), but never a
//     missing metadata dir of a controller (its raft log would be gone);
//   - adds a directory.id to files without one;
//   - refuses everything else: unformatted, another cluster's, another node's.
func checkStorage(cfg *Config, log *slog.Logger) (string, error) {
	dirs := cfg.Dirs()
	found := map[string]MetaProperties{}
	for _, d := range dirs {
		mp, err := ReadMetaProperties(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		found[d] = mp
	}
	if len(found) == 0 {
		legacy := filepath.Join(cfg.DataDir, MetaPropertiesFile)
		mp, err := ReadMetaProperties(cfg.DataDir)
		switch {
		case err == nil && !contains(dirs, cfg.DataDir):
			if mp.NodeID != cfg.NodeID {
				return "", fmt.Errorf("%w: %s belongs to node.id %d, configured node.id is %d", ErrStorage, legacy, mp.NodeID, cfg.NodeID)
			}
			log.Info("adopting the data directory of an earlier single-node version", "meta_properties", legacy, "cluster_id", mp.ClusterID)
			return mp.ClusterID, formatMissing(cfg, mp.ClusterID, dirs, found, log)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return "", err
		case cfg.Combined() && cfg.SoleVoter():
			id := RandomUUID()
			log.Info("formatting a new single-node cluster", "cluster_id", id, "dirs", strings.Join(dirs, ","))
			// A new metadata log starts at the default feature levels, as `samsa
			// storage format` would write them (a directory holding the metadata
			// store of an earlier single-node version is imported instead, at the
			// levels of a log without them).
			if checkEmptyish(cfg.MetadataDir) == nil {
				levels, err := BootstrapFeatures(cfg, "", nil)
				if err == nil {
					err = writeBootstrap(cfg.MetadataDir, FeatureRecords(cfg, levels))
				}
				if err != nil {
					return "", err
				}
			}
			return id, formatMissing(cfg, id, dirs, found, log)
		}
		return "", fmt.Errorf("%w: no meta.properties in %s: the node is not formatted; run `samsa storage format --config <file> --cluster-id <id>` with one cluster id (from `samsa storage random-uuid`) on every node", ErrStorage, strings.Join(dirs, ", "))
	}
	var clusterID, first string
	dirIDs := map[string]string{}
	for _, d := range dirs {
		mp, ok := found[d]
		if !ok {
			continue
		}
		path := filepath.Join(d, MetaPropertiesFile)
		if mp.NodeID != cfg.NodeID {
			return "", fmt.Errorf("%w: %s belongs to node.id %d, configured node.id is %d", ErrStorage, path, mp.NodeID, cfg.NodeID)
		}
		if clusterID == "" {
			clusterID, first = mp.ClusterID, path
		} else if mp.ClusterID != clusterID {
			return "", fmt.Errorf("%w: %s belongs to cluster %s but %s to cluster %s: the directories are of different clusters", ErrStorage, path, mp.ClusterID, first, clusterID)
		}
		if mp.DirectoryID != "" {
			if other, dup := dirIDs[mp.DirectoryID]; dup {
				return "", fmt.Errorf("%w: %s and %s have the same directory.id %s (a copied directory?)", ErrStorage, other, path, mp.DirectoryID)
			}
			dirIDs[mp.DirectoryID] = path
		}
	}
	if _, ok := found[cfg.MetadataDir]; !ok && cfg.Roles.Controller {
		return "", fmt.Errorf("%w: metadata.log.dir %s is not formatted but the log dirs are (cluster %s): this controller's raft log is missing; a voter that lost its log must not rejoin as if new", ErrStorage, cfg.MetadataDir, clusterID)
	}
	return clusterID, formatMissing(cfg, clusterID, dirs, found, log)
}

// formatMissing writes meta.properties where it is missing, and adds a directory.id
// to files without one.
func formatMissing(cfg *Config, clusterID string, dirs []string, found map[string]MetaProperties, log *slog.Logger) error {
	for _, d := range dirs {
		mp, ok := found[d]
		switch {
		case !ok:
			log.Info("formatting directory", "dir", d, "cluster_id", clusterID)
		case mp.DirectoryID == "" || mp.Version != 1:
			log.Info("adding a directory.id to meta.properties", "dir", d)
		default:
			continue
		}
		if err := WriteMetaProperties(d, MetaProperties{Version: 1, ClusterID: clusterID, NodeID: cfg.NodeID, DirectoryID: RandomUUID()}); err != nil {
			return err
		}
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if filepath.Clean(x) == filepath.Clean(s) {
			return true
		}
	}
	return false
}

// incarnationFile, in metadata.log.dir, holds the incarnation id of the node's last
// broker process: the next one names it as its predecessor when it registers
// (coordinator/controller's PredecessorTag), so that a restart after a crash does not
// wait for the dead process's session to expire. Only the process holding the node's
// log dirs (locked while the engine has them open) reads and writes it.
const incarnationFile = "broker.incarnation"

// takeIncarnation returns the incarnation id recorded in dir (zero if none, or
// unreadable) and records next in its place.
func takeIncarnation(dir string, next metadata.UUID) (metadata.UUID, error) {
	var prev metadata.UUID
	path := filepath.Join(dir, incarnationFile)
	if b, err := os.ReadFile(path); err == nil {
		if id, err := metadata.ParseUUID(strings.TrimSpace(string(b))); err == nil {
			prev = id
		}
	}
	if err := writeSynced(path, []byte(next.String()+"\n")); err != nil {
		return prev, fmt.Errorf("%w: recording the broker's incarnation: %w", ErrStorage, err)
	}
	return prev, nil
}
