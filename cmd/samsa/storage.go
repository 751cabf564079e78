package main

// samsa storage: the jobs of Kafka's kafka-storage.sh.
//
//	samsa storage format --config F --cluster-id ID [--ignore-formatted] [--add-scram CRED]...
//	                     [--release-version V] [--feature name=level]...
//	samsa storage random-uuid
//	samsa storage info --config F

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/net/node"
)

func init() {
	register("storage", "format a node's directories (format, random-uuid, info), as kafka-storage.sh", runStorage)
}

const storageUsage = `usage: samsa storage <command> [flags]
  random-uuid               print a new cluster id
  format                    write meta.properties (cluster id, node id, directory id)
                            into every log dir and the metadata dir of a node
      --config F  (-c)      the node's properties file (as samsa serve --config)
      --cluster-id ID (-t)  the cluster id, the same on every node
      --ignore-formatted (-g)  skip directories already formatted for this cluster
                            and node instead of failing
      --add-scram CRED (-S) a SCRAM credential the metadata log starts with (a
                            controller's), as kafka-storage.sh: repeatable,
                            'SCRAM-SHA-256=[name=alice,password=alice-secret]',
                            also iterations=N and salt=B64,saltedpassword=B64;
                            format every controller with the same credentials
      --release-version V (-r)  the release whose feature levels the metadata log
                            starts with: metadata.version (4.2: 4.2-IV1; 4.0-IV1:
                            that level) and each feature's default there (samsa
                            features version-mapping shows them); default 4.4
      --feature name=level (-f)  a feature at another level (repeatable); the key
                            samsa.transaction.version of the node's config sets
                            transaction.version when no --feature names it
      --standalone (-s)     a dynamic quorum (KIP-853, kraft.version 1) whose only
                            voter is this controller
      --initial-controllers L (-I)  a dynamic quorum of the voters L,
                            id@host:port:directory-id,... (this controller's
                            metadata.log.dir takes the directory id L gives it)
      --no-initial-controllers (-N)  a controller of a dynamic quorum that waits
                            to be added (samsa metadata-quorum add-controller)
                            A controller given controller.quorum.bootstrap.servers
                            instead of controller.quorum.voters needs one of the
                            three, unless the servers name it alone
  info --config F           show the meta.properties of the node's directories

Every node of a cluster is formatted with the same cluster id before its first
start; samsa serve refuses an unformatted directory or one of another cluster or
node. A single combined node without process.roles formats itself (at the default
feature levels). Format every controller with the same --release-version, --feature
and --add-scram arguments.`

func runStorage(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, storageUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("storage "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var configFile, clusterID string
	var ignore bool
	var scram multiFlag
	var o formatFlags
	for _, name := range []string{"add-scram", "S"} {
		fs.Var(&scram, name, "a SCRAM credential for the bootstrap metadata")
	}
	for _, name := range []string{"release-version", "r"} {
		fs.StringVar(&o.release, name, "", "the release whose feature levels the metadata log starts with")
	}
	for _, name := range []string{"feature", "f"} {
		fs.Var(&o.features, name, "a feature level, name=level (repeatable)")
	}
	for _, name := range []string{"standalone", "s"} {
		fs.BoolVar(&o.standalone, name, false, "a dynamic quorum of this controller alone")
	}
	for _, name := range []string{"initial-controllers", "I"} {
		fs.StringVar(&o.initial, name, "", "the initial voters of a dynamic quorum, id@host:port:directory-id,...")
	}
	for _, name := range []string{"no-initial-controllers", "N"} {
		fs.BoolVar(&o.noInitial, name, false, "a controller of a dynamic quorum that waits to be added")
	}
	for _, name := range []string{"config", "c"} {
		fs.StringVar(&configFile, name, "", "the node's properties file")
	}
	for _, name := range []string{"cluster-id", "t"} {
		fs.StringVar(&clusterID, name, "", "the cluster id")
	}
	for _, name := range []string{"ignore-formatted", "g"} {
		fs.BoolVar(&ignore, name, false, "skip directories already formatted")
	}
	if err := fs.Parse(rest); err != nil || fs.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		fmt.Fprintf(os.Stderr, "samsa storage %s: %v\n%s\n", sub, err, storageUsage)
		return 2
	}
	var err error
	switch sub {
	case "random-uuid":
		fmt.Println(node.RandomUUID())
		return 0
	case "format":
		o.ignore, o.scram = ignore, scram
		err = storageFormatWith(os.Stdout, configFile, clusterID, o)
	case "info":
		err = storageInfo(os.Stdout, configFile)
	default:
		fmt.Fprintf(os.Stderr, "samsa storage: unknown command %q\n%s\n", sub, storageUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa storage %s: %v\n", sub, err)
		return 1
	}
	return 0
}

// storageConfig loads a node's configuration as `samsa serve --config F` would (the
// environment's SAMSA_ keys included).
func storageConfig(configFile string) (*serverConfig, error) {
	if configFile == "" {
		return nil, errors.New("--config is required: the properties file of the node to format")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return loadConfig([]string{"--config", configFile}, os.Environ(), log, io.Discard)
}

// formatFlags are storage format's flags beyond the config file and cluster id.
type formatFlags struct {
	ignore   bool
	scram    multiFlag // --add-scram
	release  string    // --release-version
	features multiFlag // --feature

	standalone bool   // --standalone
	initial    string // --initial-controllers
	noInitial  bool   // --no-initial-controllers
}

func storageFormat(w io.Writer, configFile, clusterID string, ignore bool, addScram ...string) error {
	return storageFormatWith(w, configFile, clusterID, formatFlags{ignore: ignore, scram: addScram})
}

func storageFormatWith(w io.Writer, configFile, clusterID string, f formatFlags) error {
	if clusterID == "" {
		return errors.New("--cluster-id is required (make one with `samsa storage random-uuid`)")
	}
	cfg, err := storageConfig(configFile)
	if err != nil {
		return err
	}
	o := node.FormatOptions{IgnoreFormatted: f.ignore}
	o.Quorum.Standalone, o.Quorum.NoInitialControllers = f.standalone, f.noInitial
	if f.initial != "" {
		if o.Quorum.InitialControllers, err = node.ParseInitialControllers(f.initial); err != nil {
			return err
		}
	}
	if o.Quorum.Dynamic() && !cfg.Roles.Controller {
		fmt.Fprintln(w, "Ignoring --standalone, --initial-controllers and --no-initial-controllers: a broker-only node is no voter.")
	}
	if o.Features, err = node.BootstrapFeatures(cfg.Config, f.release, f.features); err != nil {
		return err
	}
	if o.Quorum.Dynamic() {
		o.Features[metadata.FeatureKRaftVersion] = 1 // FormatWith's, printed below
	}
	for _, a := range f.scram {
		rec, err := node.ParseAddScram(a, clusterID)
		if err != nil {
			return err
		}
		o.Bootstrap = append(o.Bootstrap, rec)
	}
	if len(o.Bootstrap) > 0 && !cfg.Roles.Controller {
		fmt.Fprintln(w, "Ignoring --add-scram: a broker-only node takes its credentials from the controllers.")
	}
	if (f.release != "" || len(f.features) > 0) && !cfg.Roles.Controller {
		fmt.Fprintln(w, "Ignoring --release-version and --feature: a broker-only node takes the feature levels from the controllers.")
	}
	res, err := node.FormatWith(cfg.Config, clusterID, o)
	if err != nil {
		return err
	}
	formatted := 0
	for _, r := range res {
		kind := "log directory"
		if filepath.Clean(r.Dir) == filepath.Clean(cfg.MetadataDir) {
			kind = "metadata directory"
		}
		if r.Skipped {
			fmt.Fprintf(w, "Skipping %s %s: already formatted for cluster %s, node %d.\n", kind, r.Dir, clusterID, cfg.NodeID)
			continue
		}
		formatted++
		fmt.Fprintf(w, "Formatting %s %s for cluster %s, node %d.\n", kind, r.Dir, clusterID, cfg.NodeID)
		if r.Bootstrap {
			mv, _ := metadata.MetadataVersionOf(o.Features[metadata.FeatureMetadataVersion])
			fmt.Fprintf(w, "Writing metadata.version %s and the feature levels %s into %s.\n", mv, featureLevelList(o.Features), filepath.Join(r.Dir, node.BootstrapRecordsFile))
			if len(o.Bootstrap) > 0 {
				fmt.Fprintf(w, "Writing %d SCRAM credential(s) into %s.\n", len(o.Bootstrap), filepath.Join(r.Dir, node.BootstrapRecordsFile))
			}
			switch q := o.Quorum; {
			case q.Standalone:
				fmt.Fprintf(w, "A dynamic controller quorum (kraft.version 1) whose only voter is node %d, directory %s.\n", cfg.NodeID, r.DirectoryID)
			case len(q.InitialControllers) > 0:
				fmt.Fprintf(w, "A dynamic controller quorum (kraft.version 1) of %d initial voters; this controller's directory is %s.\n", len(q.InitialControllers), r.DirectoryID)
			case q.NoInitialControllers:
				fmt.Fprintf(w, "A controller of a dynamic quorum (kraft.version 1), directory %s: add it with samsa metadata-quorum add-controller.\n", r.DirectoryID)
			}
		}
	}
	if formatted == 0 {
		fmt.Fprintln(w, "All of the log directories are already formatted.")
	}
	return nil
}

// featureLevelList is "group.version=1, share.version=1, ..." of the features other
// than metadata.version, by name.
func featureLevelList(levels map[string]int16) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(levels)) {
		if name != metadata.FeatureMetadataVersion {
			parts = append(parts, fmt.Sprintf("%s=%d", name, levels[name]))
		}
	}
	return strings.Join(parts, ", ")
}

func storageInfo(w io.Writer, configFile string) error {
	cfg, err := storageConfig(configFile)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIRECTORY\tCLUSTER\tNODE\tDIRECTORY ID\tVERSION")
	var errs []error
	for _, d := range cfg.Dirs() {
		mp, err := node.ReadMetaProperties(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(tw, "%s\t(not formatted)\t\t\t\n", d)
			errs = append(errs, fmt.Errorf("%s is not formatted", d))
		case err != nil:
			fmt.Fprintf(tw, "%s\t(unreadable)\t\t\t\n", d)
			errs = append(errs, err)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\n", d, mp.ClusterID, mp.NodeID, mp.DirectoryID, mp.Version)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}
