package engine

import "testing"

// BenchmarkCreateLogs creates 1,000 empty logs (one topic's partitions) with one
// CreateLogs on a fresh directory, as the metadata apply does for a new topic:
// the file creations of a new partition, and one directory sync.
func BenchmarkCreateLogs(b *testing.B) {
	const n = 1000
	want := make([]NewLog, n)
	for i := range want {
		want[i] = NewLog{TP: TopicPartition{Topic: "bench", Partition: int32(i)}, Config: DefaultLogConfig()}
	}
	for b.Loop() {
		b.StopTimer()
		m, err := Open(Options{Dirs: []string{b.TempDir()}, Sync: SyncNone})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := m.CreateLogs(want); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/log")
}
