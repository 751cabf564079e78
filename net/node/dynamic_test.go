package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDynamicBrokerConfigs: broker keys Kafka updates at run time, changed with
// IncrementalAlterConfigs on the cluster default, take effect without a restart: the
// log cleaner (asleep for an hour's log.cleaner.backoff.ms, it cleans at once once the
// backoff is lowered) and the connection limits (an override of 0 connections for
// 127.0.0.1 refuses the next connection; its deletion serves them again). Before, the
// cleaner keys were refused with "cannot be updated dynamically".
func TestDynamicBrokerConfigs(t *testing.T) {
	cfg, err := FromKeys(map[string]string{
		"log.cleaner.backoff.ms": "3600000",
		"data.dir":               t.TempDir(), "admin.listen": "", "listeners": "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Start(cfg, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := nd.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := nd.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()), kgo.DefaultProduceTopic("dyn-compact"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	compact := "compact"
	small, zero, tiny := "1024", "0", "0.01"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact, "segment.bytes": &small,
		"min.compaction.lag.ms": &zero, "min.cleanable.dirty.ratio": &tiny}, "dyn-compact"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("value-%04d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	alter := func(ops ...kadm.AlterConfig) {
		t.Helper()
		res, err := adm.AlterBrokerConfigs(ctx, ops)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = fmt.Errorf("%v: %s", r.Err, r.ErrMessage)
				}
			}
		}
		if err != nil {
			t.Fatalf("altering %+v: %v", ops, err)
		}
	}
	before := nd.eng.CleanerStats().Passes
	bo := "50"
	alter(kadm.AlterConfig{Name: "log.cleaner.backoff.ms", Value: &bo})
	waitFor(t, 20*time.Second, "a cleaner pass after log.cleaner.backoff.ms was lowered", func() error {
		if nd.eng.CleanerStats().Passes == before {
			return errors.New("no pass yet")
		}
		return nil
	})

	none := "127.0.0.1:0"
	alter(kadm.AlterConfig{Name: "max.connections.per.ip.overrides", Value: &none})
	waitFor(t, 10*time.Second, "a connection refused under max.connections.per.ip.overrides=127.0.0.1:0", func() error {
		if rawAPIVersions(t, nd.Addr()) {
			return errors.New("served")
		}
		return nil
	})
	// The admin client's connection stays open (counted, not closed): it deletes the key.
	alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "max.connections.per.ip.overrides"})
	waitFor(t, 10*time.Second, "a connection served once the override is deleted", func() error {
		if !rawAPIVersions(t, nd.Addr()) {
			return errors.New("refused")
		}
		return nil
	})
	// Kafka's read-only keys stay read-only.
	r := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeBroker
	rr.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.cleaner.enable", Value: kmsg.StringPtr("false")}}
	r.Resources = append(r.Resources, rr)
	resp, err := r.RequestWith(ctx, cl)
	if err != nil || resp.Resources[0].ErrorCode == 0 {
		t.Fatalf("log.cleaner.enable (read-only in Kafka) altered: %v %+v", err, resp)
	}
}
