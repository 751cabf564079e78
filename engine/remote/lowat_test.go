package remote

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// Over plain HTTP the client's connections wake their reader by SO_RCVLOWAT
// (lowWaterConn), and a read never waits for bytes that are not coming:
// ranged GETs whose bodies end short of lowWater, or of a read's size, or
// between lowWaterFrom and lowWater, read back whole and at once into
// large buffers, over one connection reused (the headers of each answer
// read after the last body). An HTTPS endpoint's connections are left as
// they are.
func TestLowWaterReads(t *testing.T) {
	g := startGateway(t)
	g.makeBucket(t, "lowwater")
	cfg := g.config("lowwater")
	s, err := newAWSStore(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.put(ctx, "obj", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 0}, {0, 99}, {5, lowWaterFrom + 3}, {100, lowWater + 100}, {1000, 1 << 20}, {0, int64(len(data)) - 1}, {int64(len(data)) - 70000, int64(len(data)) - 1}} {
		start := time.Now()
		rc, err := s.get(ctx, "obj", r[0], r[1])
		if err != nil {
			t.Fatalf("get [%d, %d]: %v", r[0], r[1], err)
		}
		buf := make([]byte, 4<<20) // larger than the body: the last read asks for more than is coming
		n, err := io.ReadFull(rc, buf)
		rc.Close()
		if err != io.ErrUnexpectedEOF || !bytes.Equal(buf[:n], data[r[0]:r[1]+1]) {
			t.Fatalf("get [%d, %d]: %d bytes, %v", r[0], r[1], n, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("get [%d, %d] took %v", r[0], r[1], d)
		}
	}
	dial := newTransport(&cfg).DialContext
	c, err := dial(ctx, "tcp", g.Endpoint[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*lowWaterConn); !ok {
		t.Fatalf("a connection to %s: %T, want a lowWaterConn", g.Endpoint, c)
	}
	tls := cfg
	tls.Endpoint = "https://" + g.Endpoint[len("http://"):]
	c2, err := newTransport(&tls).DialContext(ctx, "tcp", g.Endpoint[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(*net.TCPConn); !ok {
		t.Fatalf("a connection for an https endpoint: %T, want the plain TCP connection", c2)
	}
}

// A read of a lowWaterConn waits for as many bytes as it asks for up to
// lowWater, not for more: a body of 100 KiB sent in two parts, 50 ms
// apart, to a reader parked before the first, is read whole by a read of
// 100 KiB woken once (where a plain connection wakes it for the first part;
// a part there before the read is returned at once), and never waits past
// its end; a small read after it (a next answer's headers) asks for one
// byte again.
func TestLowWaterConnWaitsForWhatIsComing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		body := bytes.Repeat([]byte{7}, 100<<10)
		time.Sleep(50 * time.Millisecond) // the reader parked first
		_, _ = s.Write(body[:40<<10])
		time.Sleep(50 * time.Millisecond) // the reader parked before the rest
		_, _ = s.Write(body[40<<10:])
		time.Sleep(50 * time.Millisecond)
		_, _ = s.Write([]byte("HTTP/1.1"))
		<-done
	}()
	c, err := lowWaterDial((&net.Dialer{}).DialContext)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*lowWaterConn); !ok {
		t.Fatalf("%T, want a lowWaterConn", c)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100<<10)
	reads := 0
	for got := 0; got < len(buf); reads++ {
		n, err := c.Read(buf[got:])
		if err != nil {
			t.Fatalf("a read of %d bytes after %d: %v", len(buf)-got, got, err)
		}
		got += n
	}
	t.Logf("100 KiB in %d reads", reads)
	if n, err := c.Read(buf[:4<<10]); n != len("HTTP/1.1") || err != nil {
		t.Fatalf("a read of 4 KiB after it: %d bytes, %v", n, err)
	}
}
