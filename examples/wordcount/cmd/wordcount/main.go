// Command wordcount runs the exactly-once word count of examples/wordcount against
// a broker until Ctrl-C:
//
//	go run ./examples/wordcount/cmd/wordcount --brokers 127.0.0.1:9092
//
// It creates its topics if they are missing (the changelog compacted).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/samsa-broker/samsa/examples/wordcount"
)

func main() {
	var cfg wordcount.Config
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	flag.StringVar(&cfg.Input, "input", "sentences", "the topic of lines of text")
	flag.StringVar(&cfg.Output, "output", "word-counts", "the topic the counts are written to")
	flag.StringVar(&cfg.Changelog, "changelog", "word-counts-changelog", "the compacted changelog topic of the counts")
	flag.StringVar(&cfg.Group, "group", "wordcount", "the consumer group")
	flag.StringVar(&cfg.TransactionalID, "transactional-id", "wordcount-1", "the transactional id (keep it across restarts)")
	flag.StringVar(&cfg.InstanceID, "instance-id", "wordcount-1", "the static group member id (keep it across restarts)")
	partitions := flag.Int("partitions", 3, "partitions of the topics it creates")
	flag.Parse()
	cfg.Brokers = strings.Split(*brokers, ",")
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := createTopics(ctx, cfg, int32(*partitions)); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
	if err := wordcount.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func createTopics(ctx context.Context, cfg wordcount.Config, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for topic, configs := range map[string]map[string]*string{cfg.Input: nil, cfg.Output: nil, cfg.Changelog: compact} {
		if _, err := adm.CreateTopic(ctx, partitions, -1, configs, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	return nil
}
