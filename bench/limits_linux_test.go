package bench

import "testing"

func TestMeasureLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	l, err := MeasureLimits(t.TempDir(), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if l.WriteMBps <= 0 || l.WriteSyncMBps <= 0 || l.FdatasyncP50Ms <= 0 || l.FdatasyncP99Ms < l.FdatasyncP50Ms ||
		l.LoopbackMBps <= 0 || l.SendfileMBps <= 0 || l.FdatasyncSamples == 0 {
		t.Fatalf("limits %+v", l)
	}
}
