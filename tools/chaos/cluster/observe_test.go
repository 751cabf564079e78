package cluster

import (
	"strings"
	"testing"
)

func TestParseReplicaMetrics(t *testing.T) {
	text := `# HELP samsa_log_end_offset The partition log's end offset (the next offset to be written).
# TYPE samsa_log_end_offset gauge
samsa_log_end_offset{partition="0",topic="chaos"} 1234
samsa_log_end_offset{partition="1",topic="chaos"} 1.234567e+06
samsa_log_end_offset{partition="3",topic="other"} 9
samsa_log_end_offset{partition="2",topic="we\"ird"} 5
samsa_log_end_offset_x{partition="2",topic="chaos"} 5
samsa_log_high_watermark{partition="0",topic="chaos"} 1200
# TYPE samsa_metadata_applied_offset gauge
samsa_metadata_applied_offset 57
samsa_metadata_applied_offset_lag 3
`
	applied, leo, err := ParseReplicaMetrics(strings.NewReader(text), map[string]bool{"chaos": true, `we"ird`: true})
	if err != nil {
		t.Fatal(err)
	}
	if applied != 57 {
		t.Errorf("applied %d", applied)
	}
	want := map[TP]int64{{"chaos", 0}: 1234, {"chaos", 1}: 1234567, {`we"ird`, 2}: 5}
	if len(leo) != len(want) {
		t.Fatalf("log ends %v", leo)
	}
	for k, v := range want {
		if leo[k] != v {
			t.Errorf("%v: %d, want %d", k, leo[k], v)
		}
	}
	if a, l, _ := ParseReplicaMetrics(strings.NewReader("garbage\nsamsa_log_end_offset{partition=\"x\",topic=\"chaos\"} 1\n"), nil); a != -1 || len(l) != 0 {
		t.Errorf("garbage: %d %v", a, l)
	}
}
