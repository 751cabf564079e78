package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/engine"
)

// errConfig is wrapped by every configuration error.
var errConfig = errors.New("config")

// serverConfig is the resolved configuration of `samsa serve`.
//
// Sources, highest precedence first: flags, environment (SAMSA_ + the key upper-cased,
// dots as underscores: SAMSA_LOG_RETENTION_MS), the properties file (--config, Kafka's
// key names), Kafka's defaults.
type serverConfig struct {
	// set holds every explicitly set key with its canonical value (the broker's static
	// config, as DescribeConfigs reports it).
	set map[string]string
	// source names where each set key came from ("flag", "env", "file"), for logs.
	source map[string]string

	NodeID        int32
	DataDir       string
	MetaDir       string
	LogDirs       []string
	Listen        string // host:port to bind
	AdvertiseHost string // empty: derived from the bound address
	AdvertisePort int32  // 0: the bound port
	AdminListen   string // empty: no admin listener
	Sync          engine.SyncPolicy
	Transport     string

	FlushInterval          time.Duration
	RetentionCheckInterval time.Duration
	MaxRequestBytes        int32
	IdleTimeout            time.Duration
	AutoCreateTopics       bool
	NumPartitions          int32
	ReplicationFactor      int16
}

// flagKeys maps serve's flags onto config keys.
var flagKeys = []struct {
	flag, key, usage string
	noDefault        bool // the key's default does not apply unless set
}{
	{flag: "data-dir", key: "data.dir", usage: "data directory: <dir>/meta (metadata log), <dir>/logs (partition logs unless log.dirs)"},
	{flag: "listen", key: "listeners", usage: "Kafka listener host:port (port 0: any free port)"},
	{flag: "admin-listen", key: "admin.listen", usage: "admin HTTP listener host:port for /metrics and /debug/pprof/ (empty: off)"},
	{flag: "sync", key: "sync", usage: "durability: fsync (ack after group-committed fdatasync), interval, none"},
	{flag: "transport", key: "transport", usage: "network transport: std (Go's net) or reactor (epoll, Linux)"},
	{flag: "net-loops", key: "num.network.threads", usage: "transport=reactor: event loops (default: one per CPU)", noDefault: true},
	{flag: "node-id", key: "node.id", usage: "this broker's node id"},
	{flag: "advertised-listener", key: "advertised.listeners", usage: "host:port advertised to clients (default: the bound address)"},
}

// loadConfig resolves the configuration from args, env (os.Environ form) and the file
// args name. Unknown keys, from any source (file, SAMSA_ variables, --set), are warned
// about on log and ignored; bad values of known keys are errors.
func loadConfig(args, env []string, log *slog.Logger, usageOut io.Writer) (*serverConfig, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(usageOut)
	configFile := fs.String("config", "", "Kafka-style server.properties file")
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

	c := &serverConfig{set: map[string]string{}, source: map[string]string{}}
	put := func(src, key, value string) error {
		canon, known, err := configs.ValidateBroker(key, value)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", errConfig, src, err)
		}
		if !known {
			log.Warn("unknown config key ignored", "key", key, "from", src)
			return nil
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
				flagErr = put("flag --"+f.Name, fk.key, *flagVals[fk.key])
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
func (c *serverConfig) get(key string) string {
	if v, ok := c.set[key]; ok {
		return v
	}
	v, _ := configs.BrokerDefault(key)
	return v
}

func (c *serverConfig) getInt(key string) int64 {
	n, _ := strconv.ParseInt(c.get(key), 10, 64) // validated
	return n
}

// derive computes the typed fields from the keys.
func (c *serverConfig) derive() error {
	id := c.get("node.id")
	if _, ok := c.set["node.id"]; !ok {
		if v, ok := c.set["broker.id"]; ok {
			id = v
		}
	}
	n, _ := strconv.ParseInt(id, 10, 32)
	c.NodeID = int32(n)
	c.DataDir = c.get("data.dir")
	c.MetaDir = filepath.Join(c.DataDir, "meta")
	switch {
	case c.get("log.dirs") != "":
		c.LogDirs = strings.Split(c.get("log.dirs"), ",")
	case c.get("log.dir") != "":
		c.LogDirs = []string{c.get("log.dir")}
	default:
		c.LogDirs = []string{filepath.Join(c.DataDir, "logs")}
	}
	var err error
	if c.Listen, err = parseListener(c.get("listeners")); err != nil {
		return fmt.Errorf("%w: listeners: %w", errConfig, err)
	}
	if adv := c.get("advertised.listeners"); adv != "" {
		hp, err := parseListener(adv)
		if err != nil {
			return fmt.Errorf("%w: advertised.listeners: %w", errConfig, err)
		}
		host, port, _ := net.SplitHostPort(hp)
		p, _ := strconv.Atoi(port)
		c.AdvertiseHost, c.AdvertisePort = host, int32(p)
	}
	c.AdminListen = c.get("admin.listen")
	if c.Sync, err = engine.ParseSyncPolicy(c.get("sync")); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	c.Transport = c.get("transport")
	if v := c.get("log.flush.interval.ms"); v != "" {
		c.FlushInterval = time.Duration(c.getInt("log.flush.interval.ms")) * time.Millisecond
	}
	c.RetentionCheckInterval = time.Duration(c.getInt("log.retention.check.interval.ms")) * time.Millisecond
	c.MaxRequestBytes = int32(c.getInt("socket.request.max.bytes"))
	c.IdleTimeout = time.Duration(c.getInt("connections.max.idle.ms")) * time.Millisecond
	c.AutoCreateTopics = c.get("auto.create.topics.enable") == "true"
	c.NumPartitions = int32(c.getInt("num.partitions"))
	c.ReplicationFactor = int16(c.getInt("default.replication.factor"))
	return nil
}

// parseListener takes the first PLAINTEXT listener of "NAME://host:port,..." (entries
// without a scheme count as PLAINTEXT; others, such as CONTROLLER://, are skipped).
func parseListener(s string) (string, error) {
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if name, rest, ok := strings.Cut(entry, "://"); ok {
			if !strings.EqualFold(name, "PLAINTEXT") {
				continue
			}
			entry = rest
		}
		host, port, err := net.SplitHostPort(entry)
		if err != nil {
			return "", fmt.Errorf("listener %q: %w", entry, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return "", fmt.Errorf("listener %q: bad port", entry)
		}
		return net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("no PLAINTEXT listener in %q (only PLAINTEXT is supported)", s)
}

// envName is the environment variable of key: SAMSA_ + upper-cased, dots → underscores.
func envName(key string) string {
	return "SAMSA_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envKey maps an environment variable back to a known key.
func envKey(name string) (string, bool) {
	for _, k := range configs.BrokerKeys() {
		if envName(k) == name {
			return k, true
		}
	}
	return "", false
}

// readProperties parses a Java properties file: "key=value", "key: value" or
// "key value"; # and ! comments; a trailing backslash continues a line; \t \n \r \f
// \\ \uXXXX escapes. Later keys win.
func readProperties(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var logical strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical.Len() == 0 && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if cont := trailingBackslashes(line)%2 == 1; cont {
			logical.WriteString(line[:len(line)-1])
			continue
		}
		logical.WriteString(line)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %w", errConfig, path, lineNo, err)
		}
		out = append(out, [2]string{k, v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errConfig, path, err)
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errConfig, path, err)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProperty splits a logical line at the first unescaped '=', ':' or whitespace.
func splitProperty(line string) (string, string, error) {
	i := 0
	for ; i < len(line); i++ {
		if line[i] == '\\' {
			i++
			continue
		}
		if line[i] == '=' || line[i] == ':' || line[i] == ' ' || line[i] == '\t' || line[i] == '\f' {
			break
		}
	}
	key := line[:min(i, len(line))]
	rest := ""
	if i < len(line) {
		rest = strings.TrimLeft(line[i:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f' || line[i] == rest[0]) {
			rest = strings.TrimLeft(rest[1:], " \t\f")
		}
	}
	k, err := unescape(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescape(rest)
	if err != nil {
		return "", "", err
	}
	if k == "" {
		return "", "", errors.New("empty key")
	}
	return k, strings.TrimRight(v, " \t"), nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
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
