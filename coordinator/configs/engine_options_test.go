package configs

import (
	"testing"
	"time"

	"github.com/samsa-broker/samsa/engine"
)

func TestEngineOptions(t *testing.T) {
	var o engine.Options
	EngineOptions(nil, &o)
	if o.Cleaner.Disable || o.Cleaner.Threads != 1 || o.Cleaner.DedupeBufferSize != 128<<20 ||
		o.Cleaner.LoadFactor != 0.9 || o.Cleaner.IOBufferSize != 512<<10 || o.Cleaner.IOMaxBytesPerSecond != 0 ||
		o.Cleaner.Backoff != 15*time.Second {
		t.Fatalf("defaults: %+v", o.Cleaner)
	}
	if o.ScrubBytesPerSecond != 8<<20 || o.ScrubInterval != time.Hour || o.DisableTxnVerification {
		t.Fatalf("defaults: scrub %d every %v, txn verification off %v", o.ScrubBytesPerSecond, o.ScrubInterval, o.DisableTxnVerification)
	}
	EngineOptions(map[string]string{
		"log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1048576",
		"log.cleaner.backoff.ms": "100", "samsa.log.scrub.bytes.per.second": "4194304",
		"samsa.log.scrub.interval.ms": "60000", "transaction.partition.verification.enable": "false",
	}, &o)
	if o.Cleaner.Disable || o.Cleaner.Threads != 2 || o.Cleaner.IOMaxBytesPerSecond != 1<<20 || o.Cleaner.Backoff != 100*time.Millisecond {
		t.Fatalf("set: %+v", o.Cleaner)
	}
	if o.ScrubBytesPerSecond != 4<<20 || o.ScrubInterval != time.Minute || !o.DisableTxnVerification {
		t.Fatalf("set: scrub %d every %v, txn verification off %v", o.ScrubBytesPerSecond, o.ScrubInterval, o.DisableTxnVerification)
	}
	for _, off := range []map[string]string{{"log.cleaner.enable": "false"}, {"log.cleaner.threads": "0"}} {
		EngineOptions(off, &o)
		if !o.Cleaner.Disable {
			t.Fatalf("%v: cleaner on", off)
		}
	}
}
