package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/net/auth"
	"github.com/samsa-broker/samsa/net/node"
)

// errConfig is wrapped by every configuration error.
var errConfig = node.ErrConfig

// serverConfig is the resolved configuration of `samsa serve`: the node's
// configuration (Kafka's keys, parsed and checked by node.FromKeys) and where each
// key came from.
//
// Sources, highest precedence first: flags, environment (SAMSA_ + the key upper-cased,
// dots as underscores: SAMSA_LOG_RETENTION_MS), the properties file (--config, Kafka's
// key names), Kafka's defaults.
type serverConfig struct {
	*node.Config
	// set holds every explicitly set key with its canonical value (the broker's static
	// config, as DescribeConfigs reports it); it is Config.Keys.
	set map[string]string
	// source names where each set key came from ("flag", "env", "file"), for logs.
	source map[string]string
	// configFile is --config ("" if none).
	configFile string
	// formatClusterID is --cluster-id, or the environment's CLUSTER_ID: serve formats
	// the node's unformatted directories with it first ("": it does not).
	formatClusterID string
}

// flagKeys maps serve's flags onto config keys.
var flagKeys = []struct {
	flag, key, usage string
	noDefault        bool // the key's default does not apply unless set
}{
	{flag: "data-dir", key: "data.dir", usage: "data directory: <dir>/meta (metadata log), <dir>/logs (partition logs unless log.dirs)"},
	{flag: "listen", key: "listeners", usage: "Kafka listener host:port (port 0: any free port); with named listeners in the file, the client listener's address"},
	{flag: "admin-listen", key: "admin.listen", usage: "admin HTTP listener host:port for /metrics and /debug/pprof/ (empty: off)"},
	{flag: "sync", key: "sync", usage: "durability: fsync (ack after group-committed fdatasync), replicated (rely on the ISR, flush in the background), interval, none"},
	{flag: "transport", key: "transport", usage: "network transport: std (Go's net) or reactor (epoll, Linux)"},
	{flag: "net-loops", key: "num.network.threads", usage: "transport=reactor: event loops (default: one per CPU)", noDefault: true},
	{flag: "node-id", key: "node.id", usage: "this broker's node id"},
	{flag: "advertised-listener", key: "advertised.listeners", usage: "host:port advertised to clients (default: the bound address)"},
	{flag: "process-roles", key: "process.roles", usage: "broker, controller or broker,controller (unset: one combined node that formats itself)", noDefault: true},
	{flag: "controller-quorum-voters", key: "controller.quorum.voters", usage: "id@host:port,... of the controller voters", noDefault: true},
}

// loadConfig resolves the configuration from args, env (os.Environ form) and the file
// args name. Unknown keys, from any source (file, SAMSA_ variables, --set), are warned
// about on log and ignored; keys Samsa accepts without effect are logged; bad values of
// known keys are errors.
func loadConfig(args, env []string, log *slog.Logger, usageOut io.Writer) (*serverConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usageOut)
	configFile := fs.String("config", "", "Kafka-style server.properties file")
	formatID := fs.String("cluster-id", "", "format the node's unformatted directories with this cluster id before serving, keeping those already formatted for it (as the apache/kafka image does with CLUSTER_ID; default: the environment's CLUSTER_ID)")
	flagVals := map[string]*string{}
	for _, f := range flagKeys {
		def, _ := configs.BrokerDefault(f.key)
		if f.noDefault {
			def = ""
		}
		flagVals[f.key] = fs.String(f.flag, def, f.usage)
	}
	var sets multiFlag
	fs.Var(&sets, "set", "key=value: any config key (repeatable)")
	fs.Usage = func() { serveUsage(fs) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errConfig, fs.Args())
	}

	c := &serverConfig{set: map[string]string{}, source: map[string]string{}, configFile: *configFile, formatClusterID: *formatID}
	if c.formatClusterID == "" {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "CLUSTER_ID="); ok {
				c.formatClusterID = v
			}
		}
	}
	put := func(src, key, value string) error {
		if configs.PluginKey(key) {
			c.set[key], c.source[key] = value, src // read by the plugin's side (tiered storage's rsm.config.*)
			return nil
		}
		canon, known, err := configs.ValidateBroker(key, value)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", errConfig, src, err)
		}
		if !known {
			log.Warn("unknown config key ignored", "key", key, "from", src)
			return nil
		}
		if d := configs.Broker(key); d != nil && d.NoEffect {
			log.Info("config key accepted without effect in Samsa (docs/CONFIG.md)", "key", key, "from", src)
		}
		c.set[key], c.source[key] = canon, src
		return nil
	}
	if *configFile != "" {
		props, err := readProperties(*configFile)
		if err != nil {
			return nil, err
		}
		for _, kv := range props {
			if err := put("file "+*configFile, kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "SAMSA_") {
			continue
		}
		key, known := envKey(name)
		if !known {
			log.Warn("unknown SAMSA_ environment variable ignored", "name", name)
			continue
		}
		if err := put("env "+name, key, value); err != nil {
			return nil, err
		}
	}
	var flagErr error
	fs.Visit(func(f *flag.Flag) {
		for _, fk := range flagKeys {
			if fk.flag == f.Name && flagErr == nil {
				v := *flagVals[fk.key]
				if fk.key == "listeners" {
					v = mergeListen(c.set, v)
				}
				flagErr = put("flag --"+f.Name, fk.key, v)
			}
		}
	})
	if flagErr != nil {
		return nil, flagErr
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --set %q: want key=value", errConfig, s)
		}
		// An unknown key is warned about and ignored by put, as from every other source.
		if err := put("flag --set", strings.TrimSpace(k), v); err != nil {
			return nil, err
		}
	}
	return c, c.derive()
}

// get returns the effective value of key: set, else Kafka's default, else "".
func (c *serverConfig) get(key string) string { return c.Config.Get(key) }

// derive resolves the node's configuration from the keys.
func (c *serverConfig) derive() error {
	cfg, err := node.FromKeys(c.set)
	if err != nil {
		return err
	}
	c.Config = cfg
	return nil
}

// mergeListen applies `--listen host:port` to the listeners set by lower-precedence
// sources: with named listeners (PLAINTEXT://...,CONTROLLER://...) only the client
// listener's address changes; otherwise the flag is the whole value.
func mergeListen(set map[string]string, flagValue string) string {
	lower, ok := set["listeners"]
	if !ok || strings.Contains(flagValue, "://") || !strings.Contains(lower, "://") {
		return flagValue
	}
	ls, err := node.ParseListeners("listeners", lower)
	if err != nil {
		return flagValue // the flag replaces a broken value; the error would name it anyway
	}
	ctl := strings.Split(strings.ToUpper(set["controller.listener.names"]), ",")
	if _, ok := set["controller.listener.names"]; !ok {
		ctl = []string{"CONTROLLER"}
	}
	target := -1
	for i, l := range ls {
		if slices.Contains(ctl, l.Name) {
			continue
		}
		if target < 0 || l.Name == "PLAINTEXT" || l.Name == strings.ToUpper(set["inter.broker.listener.name"]) {
			target = i
		}
	}
	if target < 0 {
		return flagValue
	}
	host, port, err := net.SplitHostPort(flagValue)
	if err != nil {
		return flagValue // refused with the flag's value in the message
	}
	p, _ := strconv.Atoi(port)
	ls[target].Host, ls[target].Port = host, p
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// envName is the environment variable of key: SAMSA_ + upper-cased, dots → underscores.
func envName(key string) string {
	return "SAMSA_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envKey maps an environment variable back to a known key. A listener's override
// (Kafka's listener.name.<listener>.<key>) is SAMSA_LISTENER_NAME_ + the listener's
// name + the key's variable without SAMSA_, e.g.
// SAMSA_LISTENER_NAME_SASL_SSL_PLAIN_SASL_JAAS_CONFIG for
// listener.name.sasl_ssl.plain.sasl.jaas.config: the listener's name is the shortest
// prefix that leaves a key a listener may override.
func envKey(name string) (string, bool) {
	for _, k := range configs.BrokerKeys() {
		if envName(k) == name {
			return k, true
		}
	}
	rest, ok := strings.CutPrefix(name, "SAMSA_LISTENER_NAME_")
	if !ok {
		return "", false
	}
	for i := 1; i < len(rest)-1; i++ {
		if rest[i] != '_' {
			continue
		}
		listener, sub := strings.ToLower(rest[:i]), rest[i+1:]
		for _, mech := range []string{"PLAIN", "SCRAM_SHA_256", "SCRAM_SHA_512"} {
			if sub == mech+"_SASL_JAAS_CONFIG" {
				return "listener.name." + listener + "." + strings.ToLower(strings.ReplaceAll(mech, "_", "-")) + ".sasl.jaas.config", true
			}
		}
		for _, k := range configs.BrokerKeys() {
			if envName(k) != "SAMSA_"+sub {
				continue
			}
			key := "listener.name." + listener + "." + k
			if _, known, _ := configs.ValidateBroker(key, ""); known {
				return key, true
			}
		}
	}
	return "", false
}

// readProperties parses a Java properties file (auth.ReadProperties).
func readProperties(path string) ([][2]string, error) {
	kvs, err := auth.ReadProperties(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return kvs, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// describe lists the explicitly set keys and their sources, sorted, for the start log.
func (c *serverConfig) describe() []any {
	keys := make([]string, 0, len(c.set))
	for k := range c.set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []any
	for _, k := range keys {
		out = append(out, slog.String(k, c.set[k]+" ("+c.source[k]+")"))
	}
	return out
}
