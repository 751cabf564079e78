package node

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/controller"
)

// The admin listener's probes, as an orchestrator asks them (Kubernetes' liveness and
// readiness probes, a rolling restart between nodes): 200 or 503, with a one-line
// reason in the body.
//
//   - GET /live: the process serves and is not shutting down.
//   - GET /ready: a broker's listeners accept, it runs (registered, caught up with the
//     metadata log once and unfenced, as its own image shows), not in a controlled
//     shutdown; a controller-only node knows the
//     quorum's leader. With ?isr=true also every partition with a replica on this
//     broker has it in its ISR: the condition a rolling restart waits for before it
//     stops the next node.
func (n *Node) handleLive(w http.ResponseWriter, _ *http.Request) {
	if n.stopping.Load() {
		probeAnswer(w, false, "shutting down")
		return
	}
	probeAnswer(w, true, "live")
}

func (n *Node) handleReady(w http.ResponseWriter, r *http.Request) {
	ok, why := n.readiness(r.URL.Query().Get("isr") == "true")
	probeAnswer(w, ok, why)
}

func probeAnswer(w http.ResponseWriter, ok bool, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, why)
}

// readiness says whether the node is ready, and why (not).
func (n *Node) readiness(isr bool) (bool, string) {
	if n.stopping.Load() {
		return false, "shutting down"
	}
	if n.brk == nil {
		if n.ctl == nil {
			return false, "no role started"
		}
		if s := n.ctl.q.Status(); s.Leader < 0 {
			return false, "controller: no quorum leader known"
		} else {
			return true, fmt.Sprintf("ready: controller %d, quorum leader %d, term %d", n.cfg.NodeID, s.Leader, s.Term)
		}
	}
	r := n.brk
	select {
	case <-r.ready:
		if r.err != nil {
			return false, "broker failed to start: " + r.err.Error()
		}
	default:
		why := "broker: not serving yet"
		if r.lifecycle != nil {
			why += " (state " + r.lifecycle.State().String() + ": registering with the controller quorum, catching up with the metadata log, or fenced)"
		}
		return false, why
	}
	if st := r.lifecycle.State(); st != controller.StateRunning {
		return false, "broker state " + st.String()
	}
	// Unfenced in its own image: the controller unfenced it once it had caught up
	// with the metadata log (a lag of a few entries since does not make it unready).
	offset, im := r.follower.Image()
	id := n.cfg.NodeID
	b, ok := im.Broker(id)
	switch {
	case !ok:
		return false, "broker: not registered in its metadata image"
	case b.Fenced:
		return false, "broker: fenced"
	case b.InControlledShutdown:
		return false, "broker: in controlled shutdown"
	}
	if !isr {
		return true, fmt.Sprintf("ready: broker %d, epoch %d, metadata offset %d", id, b.Epoch, offset)
	}
	var out []string
	n0 := 0
	for _, t := range im.Topics() {
		for p, pi := range t.Partitions {
			if slices.Contains(pi.Replicas, id) && !slices.Contains(pi.ISR, id) {
				n0++
				if len(out) < 5 {
					out = append(out, fmt.Sprintf("%s-%d", t.Name, p))
				}
			}
		}
	}
	if n0 > 0 {
		more := ""
		if n0 > len(out) {
			more = ", ..."
		}
		return false, fmt.Sprintf("broker %d: %d partition(s) with a replica here out of the ISR: %s%s", id, n0, strings.Join(out, ", "), more)
	}
	return true, fmt.Sprintf("ready: broker %d, epoch %d, metadata offset %d, in every ISR of its replicas", id, b.Epoch, offset)
}
