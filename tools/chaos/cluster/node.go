package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is one `samsa serve` process of a cluster, across its restarts.
type Node struct {
	c              *Cluster
	ID             int
	Host           string
	KafkaPort      int
	ControllerPort int
	AdminPort      int
	Dir            string
	DiskDir        string
	LogDir         string
	MetaDir        string
	ConfigPath     string // KRaft mode
	Journal        string // power-loss journal, when configured

	mu struct {
		sync.Mutex
		cmd       *exec.Cmd
		done      chan struct{} // closed when the current process has exited
		paused    bool
		expected  bool // the cluster killed or stopped it
		starts    int
		tail      []string
		unknown   map[string]bool // config keys the broker warned about as unknown
		switches  []string        // fault switches the broker reported active
		started   bool            // the current process logged that it listens
		listening chan struct{}   // closed when started becomes true
		cut       string          // the power-loss journal's report at this start
	}
}

// Addr is the node's Kafka address.
func (n *Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.KafkaPort)) }

// AdminAddr is the node's admin HTTP address.
func (n *Node) AdminAddr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.AdminPort)) }

// ControllerAddr is the node's controller listener (KRaft mode).
func (n *Node) ControllerAddr() string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.ControllerPort))
}

// LogPath is the file receiving the node's output.
func (n *Node) LogPath() string { return n.Dir + "/samsa.log" }

const tailLines = 40

// start launches the process (it must not be running).
func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd != nil {
		return fmt.Errorf("cluster: node %d already running", n.ID)
	}
	logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	args := n.c.args(n)
	name := n.c.cfg.Bin
	if n.c.net != nil {
		args = append(append(n.c.net.ExecPrefix(n.ID)[1:], name), args...)
		name = n.c.net.ExecPrefix(n.ID)[0]
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = n.Dir
	cmd.Env = n.c.env(n)
	// The broker dies with the harness: a crashed run leaves no process behind.
	cmd.SysProcAttr = childAttr()
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return fmt.Errorf("cluster: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	n.mu.starts++
	fmt.Fprintf(logf, "=== samsa-chaos: start %d of node %d at %s: %s %s\n", n.mu.starts, n.ID, time.Now().Format(time.RFC3339Nano), name, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return fmt.Errorf("cluster: start node %d: %w", n.ID, err)
	}
	pw.Close()
	n.mu.cmd = cmd
	n.mu.done = make(chan struct{})
	n.mu.paused, n.mu.expected, n.mu.started = false, false, false
	n.mu.switches = nil
	n.mu.cut = ""
	n.mu.listening = make(chan struct{})
	n.mu.unknown = map[string]bool{}
	scanned := make(chan struct{})
	go n.scan(pr, logf, scanned)
	go n.wait(cmd, n.mu.done, scanned)
	return nil
}

// scan copies the process's output to the log file and notes what the harness
// looks for in it.
func (n *Node) scan(r io.ReadCloser, logf *os.File, done chan struct{}) {
	defer close(done)
	defer r.Close()
	defer logf.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			logf.WriteString(line)
			n.note(strings.TrimRight(line, "\n"))
		}
		if err != nil {
			return
		}
	}
}

func (n *Node) note(line string) {
	kv := ParseLogLine(line)
	if f := n.c.cfg.OnAuthFailure; f != nil && IsAuthFailure(kv["msg"]) {
		f(AuthFailure{Node: n.ID, At: time.Now(), Msg: kv["msg"], Line: line})
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(line) > 500 {
		line = line[:500] + "..."
	}
	n.mu.tail = append(n.mu.tail, line)
	if len(n.mu.tail) > tailLines {
		n.mu.tail = n.mu.tail[len(n.mu.tail)-tailLines:]
	}
	switch kv["msg"] {
	case "unknown config key ignored":
		n.mu.unknown[kv["key"]] = true
	case "unknown SAMSA_ environment variable ignored":
		n.mu.unknown[kv["name"]] = true
	case FaultSwitchesMsg:
		n.mu.switches = SplitSwitches(kv["switches"])
	case "listening":
		if !n.mu.started {
			n.mu.started = true
			close(n.mu.listening)
		}
	}
	if strings.HasPrefix(kv["msg"], PowerLossCutPrefix) {
		var parts []string
		for k, v := range kv {
			if k != "time" && k != "level" && k != "msg" && k != "journal" {
				parts = append(parts, k+"="+v)
			}
		}
		sort.Strings(parts)
		n.mu.cut = kv["msg"] + " " + strings.Join(parts, " ")
	}
}

func (n *Node) wait(cmd *exec.Cmd, done chan struct{}, scanned chan struct{}) {
	err := cmd.Wait()
	<-scanned
	n.mu.Lock()
	expected := n.mu.expected
	tail := append([]string(nil), n.mu.tail...)
	n.mu.cmd = nil
	n.mu.paused = false
	close(done)
	n.mu.Unlock()
	if !expected && n.c.cfg.OnExit != nil {
		msg := "exited with status 0"
		if err != nil {
			msg = err.Error()
		}
		n.c.cfg.OnExit(Exit{Node: n.ID, Err: msg, At: time.Now(), Tail: tail})
	}
}

// Running reports whether the node's process is alive (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.cmd != nil
}

// Paused reports whether the node is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.paused
}

// Pid is the current process id, 0 when not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil || n.mu.cmd.Process == nil {
		return 0
	}
	return n.mu.cmd.Process.Pid
}

// Starts counts the node's process starts.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.starts
}

// Tail is the last lines the node logged.
func (n *Node) Tail() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.mu.tail...)
}

// Unknown lists the config keys (and SAMSA_ variables) the current process warned
// about as unknown, sorted.
func (n *Node) Unknown() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k := range n.mu.unknown {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Switches lists the fault switches the current process reported active.
func (n *Node) Switches() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.mu.switches...)
}

// PowerLossCut is what the broker said the power-loss journal cut at its current
// start ("" when it said nothing).
func (n *Node) PowerLossCut() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.cut
}

// signal sends sig to the running process.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil {
		return fmt.Errorf("cluster: node %d is not running", n.ID)
	}
	if err := n.mu.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: node %d: %v: %w", n.ID, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.mu.paused = true
	case syscall.SIGCONT:
		n.mu.paused = false
	case syscall.SIGKILL, syscall.SIGTERM:
		n.mu.expected = true
	}
	return nil
}

func (n *Node) doneCh() chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil {
		return nil
	}
	return n.mu.done
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Node) Kill() error {
	done := n.doneCh()
	if done == nil {
		return fmt.Errorf("cluster: node %d is not running", n.ID)
	}
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-done
	return nil
}

// kill is Kill without the error of a node already down.
func (n *Node) kill() {
	if n.doneCh() != nil {
		n.Kill()
	}
}

// Stop sends SIGTERM (and SIGCONT, should the node be paused), waits up to grace for
// the process to exit, then kills it. Stopping a node that is not running is not an
// error.
func (n *Node) Stop(grace time.Duration) error {
	done := n.doneCh()
	if done == nil {
		return nil
	}
	if err := n.signal(syscall.SIGTERM); err != nil {
		return err
	}
	n.signal(syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		n.Kill()
		return fmt.Errorf("cluster: node %d did not stop within %s of SIGTERM; killed", n.ID, grace)
	}
}

// Pause sends SIGSTOP.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

// Restart starts the node's process again (it must be down) and waits until it
// answers Metadata naming itself.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.start(); err != nil {
		return err
	}
	return n.WaitReady(ctx, 0)
}

// ErrExited: the process ended while the harness waited for it to be ready.
var ErrExited = errors.New("cluster: node exited")

// WaitReady waits until the node answers a Metadata request listing itself and at
// least brokers brokers, within the cluster's start timeout.
func (n *Node) WaitReady(ctx context.Context, brokers int) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, n.c.cfg.StartTimeout)
	defer cancel()
	done := n.doneCh()
	if done == nil {
		return fmt.Errorf("%w: node %d is not running", ErrExited, n.ID)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second), kgo.DialTimeout(time.Second)},
		n.c.AdminOpts()...)...)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer cl.Close()
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		last = n.probe(ctx, cl, brokers)
		if last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%w: node %d, while starting: %s", ErrExited, n.ID, n.complaint())
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("cluster: stopped waiting for node %d (%v): %v", n.ID, parent.Err(), last)
			}
			return fmt.Errorf("cluster: node %d not ready within %s: %v; log: %s", n.ID, n.c.cfg.StartTimeout, last, strings.Join(lastN(n.Tail(), 5), " | "))
		case <-tick.C:
		}
	}
}

func (n *Node) probe(ctx context.Context, cl *kgo.Client, brokers int) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	self := false
	for _, b := range resp.Brokers {
		if int(b.NodeID) == n.ID {
			self = true
		}
	}
	if !self {
		return fmt.Errorf("metadata does not list node %d yet", n.ID)
	}
	if len(resp.Brokers) < brokers {
		return fmt.Errorf("metadata lists %d of %d brokers", len(resp.Brokers), brokers)
	}
	return nil
}

// SawListening waits up to d until the current process's log has shown its
// "listening" line (start-up lines before it, such as FaultSwitchesMsg, have then been
// read), and reports whether it did.
func (n *Node) SawListening(d time.Duration) bool {
	n.mu.Lock()
	ch := n.mu.listening
	n.mu.Unlock()
	if ch == nil {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// complaint is the last error the node logged ("msg: err"), else its last lines.
func (n *Node) complaint() string {
	tail := n.Tail()
	for i := len(tail) - 1; i >= 0; i-- {
		kv := ParseLogLine(tail[i])
		if kv["level"] == "ERROR" {
			if kv["err"] != "" {
				return kv["msg"] + ": " + kv["err"]
			}
			return kv["msg"]
		}
	}
	return strings.Join(lastN(tail, 3), " | ")
}

func lastN(xs []string, k int) []string {
	if len(xs) > k {
		return xs[len(xs)-k:]
	}
	return xs
}
