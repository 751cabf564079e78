package engine

import "sync/atomic"

func loadInt64(p *int64) int64   { return atomic.LoadInt64(p) }
func addInt64(p *int64, d int64) { atomic.AddInt64(p, d) }
