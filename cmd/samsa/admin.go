package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// adminCmd is what the operator commands (cluster, topics, transactions, acls, users)
// share: the flag set with --bootstrap-server, --command-config and --timeout, and the
// client.
type adminCmd struct {
	name      string // "topics create", for messages
	usage     string
	fs        *flag.FlagSet
	bootstrap string
	config    string // --command-config: Kafka client properties (clientconfig.go)
	timeout   time.Duration
}

func newAdminCmd(name, usage string) *adminCmd {
	a := &adminCmd{name: name, usage: usage, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	a.fs.SetOutput(io.Discard)
	a.fs.StringVar(&a.bootstrap, "bootstrap-server", "127.0.0.1:9092", "brokers to connect to (host:port,...)")
	a.fs.StringVar(&a.config, "command-config", "", "Kafka client properties: security.protocol, sasl.*, ssl.* (clientconfig.go)")
	a.fs.DurationVar(&a.timeout, "timeout", 30*time.Second, "how long the command may take")
	return a
}

// parse parses args (flags and positional arguments in any order); on error it prints
// the usage and returns false.
func (a *adminCmd) parse(args []string) ([]string, bool) {
	pos, err := parseInterleaved(a.fs, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa %s: %v\n%s\n", a.name, err, a.usage)
		return nil, false
	}
	return pos, true
}

// run connects and calls f with a context bounded by --timeout; it returns the exit
// code.
func (a *adminCmd) run(f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error) int {
	cl, err := a.client()
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa %s: %v\n", a.name, err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	if err := f(ctx, cl, kadm.NewClient(cl)); err != nil {
		fmt.Fprintf(os.Stderr, "samsa %s: %v\n", a.name, err)
		return 1
	}
	return 0
}

// client returns a client of --bootstrap-server and --command-config, with
// more options.
func (a *adminCmd) client(more ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(a.bootstrap, ",")...)}
	if a.config != "" {
		cc, err := loadClientConfig(a.config, os.Stderr)
		if err != nil {
			return nil, err
		}
		opts = append(opts, cc...)
	}
	return kgo.NewClient(append(opts, more...)...)
}

func joinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
