//go:build !unix

package transport

// inlineInit: no inline writes on this platform; the writer goroutine writes
// every answer.
func (c *stdConn) inlineInit() {}
