package tiered

// ChunkBuffers returns how many chunk buffers m's pool handed out again and
// how many it holds free now (chunkPool), for the tests of their reuse.
func ChunkBuffers(m *Manager) (reused int64, free int) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return m.pool.reused.Load(), len(m.pool.mu.free)
}
