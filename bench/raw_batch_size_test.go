package bench

import "testing"

// Every built-in workload's raw batches fit Kafka's default max.message.bytes, so a
// broker with default limits accepts them (a refused batch would otherwise turn a
// capacity run into a loop of errors).
func TestRawBatchesFitDefaultMaxMessageBytes(t *testing.T) {
	const kafkaDefaultMaxMessageBytes = 1048588
	for _, name := range BuiltinWorkloads() {
		w, err := LoadWorkload(name)
		if err != nil {
			t.Fatal(err)
		}
		n := defaultRawRecordsPerBatch(w)
		b := AppendRecordBatch(nil, n, make([]byte, w.MessageSize), 0)
		if len(b) > kafkaDefaultMaxMessageBytes || n < 1 {
			t.Errorf("%s: %d records of %d bytes make a %d-byte batch", name, n, w.MessageSize, len(b))
		}
	}
}
