package node

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsa-broker/samsa/coordinator/configs"
	"github.com/samsa-broker/samsa/net/transport"
)

func TestConnLimitsFromKeys(t *testing.T) {
	cfg, err := FromKeys(map[string]string{
		"listeners":                                           "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"max.connections":                                     "1000",
		"max.connections.per.ip":                              "0",
		"max.connections.per.ip.overrides":                    "127.0.0.1:50,[::1]:5",
		"max.connection.creation.rate":                        "30",
		"listener.name.external.max.connections":              "10",
		"listener.name.external.max.connection.creation.rate": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.ConnLimits
	if l.MaxConns != 1000 || l.MaxConnsPerIP != transport.NoConnections || l.PerIPOverrides["127.0.0.1"] != 50 || l.PerIPOverrides["::1"] != 5 || l.MaxCreationRate != 30 {
		t.Fatalf("limits %+v", l)
	}
	if e := l.Listeners["EXTERNAL"]; e.MaxConns != 10 || e.MaxCreationRate != 3 || e.Protected {
		t.Fatalf("EXTERNAL %+v", e)
	}
	if p := l.Listeners["PLAINTEXT"]; !p.Protected || p.MaxConns != 0 {
		t.Fatalf("the inter-broker listener %+v", p)
	}
	def, err := FromKeys(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if d := def.ConnLimits; d.MaxConns != 0 || d.MaxConnsPerIP != 0 || d.MaxCreationRate != 0 {
		t.Fatalf("Kafka's defaults are no limits: %+v", d)
	}
	if _, err := FromKeys(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "max.connections.per.ip.overrides": "nocount"}); err == nil {
		t.Fatal("a bad override was accepted")
	}
	if _, known, err := configs.ValidateBroker("listener.name.external.max.connections", "many"); !known || err == nil {
		t.Fatalf("listener.name.<l>.max.connections is validated as an int: known %v, %v", known, err)
	}
}

// rawAPIVersions reports whether a new connection to addr is served (an ApiVersions
// answered) rather than closed at accept.
func rawAPIVersions(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return false
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return false
	}
	_, err = io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(hdr[:])))
	return err == nil
}

// A node on each transport with Kafka's connection limit keys: a listener's
// max.connections closes the connection over it at accept, an ip's
// connection_creation_rate quota (AlterClientQuotas) refuses a second connection
// within its second, and /metrics counts both refusals by listener and limit.
func TestConnLimitsNode(t *testing.T) {
	for _, kind := range []string{transport.KindStd, transport.KindReactor} {
		t.Run(kind, func(t *testing.T) {
			cfg, err := FromKeys(map[string]string{
				"listeners":                              "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
				"listener.security.protocol.map":         "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
				"listener.name.external.max.connections": "1",
				"connections.max.idle.ms":                "500",
				"transport":                              kind,
				"data.dir":                               t.TempDir(), "admin.listen": "127.0.0.1:0",
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
			ext := nd.ListenerAddr("EXTERNAL")
			if !rawAPIVersions(t, ext) {
				t.Fatal("the first EXTERNAL connection was not served")
			}
			if rawAPIVersions(t, ext) {
				t.Fatal("a second EXTERNAL connection was served over listener.name.external.max.connections=1")
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			one := "127.0.0.1"
			if res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &one}},
				Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}}}); err != nil || res[0].Err != nil {
				t.Fatalf("ip quota: %v %+v", err, res)
			}
			served := 0
			for range 3 {
				if rawAPIVersions(t, nd.Addr()) {
					served++
				}
			}
			if served > 2 {
				t.Fatalf("%d of 3 connections within a second served under connection_creation_rate=1", served)
			}
			fams := scrape(t, nd.AdminAddr())
			if m, ok := series(fams, "samsa_connections_refused_total", "listener", "EXTERNAL", "reason", transport.RefusedListener); !ok || value(m) != 1 {
				t.Fatalf("listener refusals not counted: %v", m)
			}
			if m, ok := series(fams, "samsa_connections_refused_total", "listener", "PLAINTEXT", "reason", transport.RefusedIPRate); !ok || value(m) < 1 {
				t.Fatalf("ip-rate refusals not counted: %v", m)
			}
			// connections.max.idle.ms: with the ip quota removed, a connection stalled
			// inside a size prefix is accepted, then closed when idle.
			// The admin client's connection may have been closed as idle (500 ms): the
			// removal may need a new one, refused until the quota's bucket refills.
			waitFor(t, 10*time.Second, "the ip quota removed", func() error {
				res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &one}},
					Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}}})
				if err == nil {
					err = res[0].Err
				}
				return err
			})
			// The removal reaches the listener with the broker's next image.
			waitFor(t, 10*time.Second, "a connection accepted after the ip quota was removed", func() error {
				if !rawAPIVersions(t, nd.Addr()) {
					return errors.New("refused")
				}
				return nil
			})
			stalled, err := net.Dial("tcp", nd.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer stalled.Close()
			stalled.SetDeadline(time.Now().Add(20 * time.Second))
			stalled.Write([]byte{0, 0, 0})
			if n, err := stalled.Read(make([]byte, 1)); err == nil {
				t.Fatalf("a stalled connection got %d bytes", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a connection stalled in a size prefix was not closed by connections.max.idle.ms=500")
			}
		})
	}
}
