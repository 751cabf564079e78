package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// HistoryVersion is the format version written in the header.
const HistoryVersion = 1

// Func names what an operation did.
type Func string

// The operations of the queue workload.
const (
	FSend   Func = "send"   // a producer sent V to partition P; ok: acknowledged at offset O
	FPoll   Func = "poll"   // a consumer polled Recs
	FCommit Func = "commit" // a group member committed Offs (next offset to read, per partition)
	FAssign Func = "assign" // a consumer was given Parts (group assignment, or assigned at open)
	FRevoke Func = "revoke" // a group member lost Parts (revoked or lost)
	FOpen   Func = "open"   // a client process started
	FClose  Func = "close"  // a client process stopped
	FFault  Func = "fault"  // a nemesis fault, from injection (Start) to healed (End)
	FEvent  Func = "event"  // something the harness saw (a node exited on its own, ...)
	// FReplica is the replica monitor's (check_replicas.go): an isr-behind-hw it found
	// (Status fail, Replica.Finding), and at the end what it saw (Status ok,
	// Replica.Stats).
	FReplica Func = "replicas"
)

// ProcReplicas is the process of the replica monitor's ops.
const ProcReplicas = "replicas"

// ReplicaOp is the payload of an FReplica op.
type ReplicaOp struct {
	Finding *ReplicaFinding `json:"finding,omitempty"`
	Stats   *ReplicaStats   `json:"stats,omitempty"`
}

// The operations of the transactional workload, on a topic of its own (the queue
// checks ignore them; checkTxn judges them).
const (
	// FTxn is one transaction of a transactional producer: Recs are the records it
	// produced ([partition, offset acknowledged or -1, value]); ok: committed (the
	// EndTxn commit was answered), fail: aborted (by choice or after a failed
	// produce, the abort answered), info: unknown. A consume-transform-produce
	// transaction also has Reads: what its read_committed poll returned, after
	// Start and before any of its records was produced.
	FTxn Func = "txn"
	// FTxnPoll is a read_committed consumer's poll of the transactional topic.
	FTxnPoll Func = "txn-poll"
)

// Status says whether an operation took effect.
type Status string

// Statuses, as Jepsen's: ok happened, fail certainly did not, info may have.
const (
	OK   Status = "ok"
	Fail Status = "fail"
	Info Status = "info"
)

// Rec is one record seen by a poll. It is written as [partition, offset, value].
type Rec struct {
	P int32
	O int64
	V string
}

// MarshalJSON writes [p, o, v].
func (r Rec) MarshalJSON() ([]byte, error) {
	v, err := json.Marshal(r.V)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "[%d,%d,%s]", r.P, r.O, v), nil
}

// UnmarshalJSON reads [p, o, v].
func (r *Rec) UnmarshalJSON(b []byte) error {
	var a []json.RawMessage
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 3 {
		return fmt.Errorf("chaos: record: want [partition, offset, value], got %d elements", len(a))
	}
	if err := json.Unmarshal(a[0], &r.P); err != nil {
		return fmt.Errorf("chaos: record partition: %w", err)
	}
	if err := json.Unmarshal(a[1], &r.O); err != nil {
		return fmt.Errorf("chaos: record offset: %w", err)
	}
	if err := json.Unmarshal(a[2], &r.V); err != nil {
		return fmt.Errorf("chaos: record value: %w", err)
	}
	return nil
}

// FaultInfo describes a nemesis operation.
type FaultInfo struct {
	Kind string `json:"kind"`
	// Nodes are the node ids the fault acted on.
	Nodes []int `json:"nodes,omitempty"`
	// Detail says how the target was chosen and what was done ("leader of p2 (metadata)").
	Detail string `json:"detail,omitempty"`
	// Heal is when healing began (ns since start); the op's End is when it finished.
	Heal int64 `json:"heal,omitempty"`
}

// Op is one operation of a history. Which fields are set depends on F (see the
// constants); the JSON names are short because a long run writes millions of them.
type Op struct {
	ID     int64  `json:"id"`
	Proc   string `json:"proc"`
	F      Func   `json:"f"`
	Status Status `json:"st"`
	// Start and End: the operation's interval, ns of the monotonic clock since the run
	// began. An op that never completed (a send still unanswered at close) has the End
	// at which the harness gave up on it and Status Info.
	Start int64 `json:"s"`
	End   int64 `json:"e"`
	// Wall is the wall clock at Start, Unix ns.
	Wall int64 `json:"w,omitempty"`
	// Seq is a process's invocation number of the op (sends: their order of sending).
	Seq int64 `json:"seq,omitempty"`

	P int32  `json:"p,omitempty"`
	O int64  `json:"o,omitempty"`
	V string `json:"v,omitempty"`

	Recs  []Rec           `json:"recs,omitempty"`
	Prods []string        `json:"prods,omitempty"` // a poll's: each record's producer "<id>/<epoch>" ("": none), when recorded
	Reads []Rec           `json:"reads,omitempty"` // a transaction's reads (FTxn)
	Offs  map[int32]int64 `json:"offs,omitempty"`
	Parts []int32         `json:"parts,omitempty"`
	Group string          `json:"g,omitempty"`
	Err   string          `json:"err,omitempty"`
	// PartErr holds a commit's per-partition errors (partitions absent: committed).
	PartErr map[int32]string `json:"perr,omitempty"`
	Fault   *FaultInfo       `json:"fault,omitempty"`
	Replica *ReplicaOp       `json:"replica,omitempty"`
}

// Header is the first line of a history: what the run was.
type Header struct {
	Version    int    `json:"version"`
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
	Seed       int64  `json:"seed"`
	// Command replays the run's schedule.
	Command string `json:"command,omitempty"`
	// Started is the wall clock at monotonic zero, Unix ns.
	Started int64 `json:"started"`
	Nodes   int   `json:"nodes"`
	// Liveness is the bound of the liveness checks, ns.
	Liveness int64 `json:"liveness_ns,omitempty"`
	// Notes are things the run said at start (nemeses skipped and why, modes chosen).
	Notes []string `json:"notes,omitempty"`
}

// History is a header and its operations.
type History struct {
	Header Header
	Ops    []Op
}

// ErrHistory is wrapped by every error about a malformed history.
var ErrHistory = errors.New("chaos: bad history")

// MaxLine bounds one line of a history file (a poll of many records is one line).
const MaxLine = 64 << 20

// ReadHistory reads a history file.
func ReadHistory(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	defer f.Close()
	return DecodeHistory(f)
}

// DecodeHistory reads a history: its header line, then one op per line. A last
// line cut short (the harness was killed while writing) is dropped; any other bad
// line is an error naming its line number.
func DecodeHistory(r io.Reader) (*History, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), MaxLine)
	h := &History{}
	line := 0
	var pending error
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		if pending != nil {
			return nil, pending
		}
		if line == 1 {
			var w struct {
				Header *Header `json:"header"`
			}
			if err := json.Unmarshal(b, &w); err != nil || w.Header == nil {
				return nil, fmt.Errorf("%w: line 1 is not a header", ErrHistory)
			}
			if w.Header.Version != HistoryVersion {
				return nil, fmt.Errorf("%w: version %d, this checker reads %d", ErrHistory, w.Header.Version, HistoryVersion)
			}
			h.Header = *w.Header
			continue
		}
		var op Op
		if err := json.Unmarshal(b, &op); err != nil {
			// Only the last line may be torn: remember, fail if another follows.
			pending = fmt.Errorf("%w: line %d: %v", ErrHistory, line, err)
			continue
		}
		h.Ops = append(h.Ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrHistory, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: empty", ErrHistory)
	}
	return h, nil
}

// Writer appends ops to a history file as they complete. It is safe for concurrent
// use; ids are given in the order Append is called.
type Writer struct {
	start time.Time
	mu    struct {
		sync.Mutex
		w      *bufio.Writer
		f      *os.File
		enc    *json.Encoder
		nextID int64
		err    error
		closed bool
	}
}

// CreateHistory creates path and writes the header. start is the run's monotonic zero
// (the header's Started is its wall clock).
func CreateHistory(path string, h Header, start time.Time) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("chaos: history: %w", err)
	}
	w := &Writer{start: start}
	w.mu.f = f
	w.mu.w = bufio.NewWriterSize(f, 1<<20)
	w.mu.enc = json.NewEncoder(w.mu.w)
	h.Version = HistoryVersion
	h.Started = start.UnixNano()
	if err := w.mu.enc.Encode(struct {
		Header Header `json:"header"`
	}{h}); err != nil {
		f.Close()
		return nil, fmt.Errorf("chaos: history header: %w", err)
	}
	return w, nil
}

// Now is the monotonic time since the run's start, ns, and the wall clock, Unix ns.
func (w *Writer) Now() (mono, wall int64) {
	t := time.Now()
	return int64(t.Sub(w.start)), t.UnixNano()
}

// Since converts a time to the history's monotonic ns.
func (w *Writer) Since(t time.Time) int64 { return int64(t.Sub(w.start)) }

// Append gives op the next id and writes it. The first write error is kept and
// returned by every later call and by Close.
func (w *Writer) Append(op Op) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return w.mu.err
	}
	if w.mu.closed {
		return fmt.Errorf("chaos: history closed")
	}
	w.mu.nextID++
	op.ID = w.mu.nextID
	if err := w.mu.enc.Encode(&op); err != nil {
		w.mu.err = fmt.Errorf("chaos: history: %w", err)
	}
	return w.mu.err
}

// Flush writes buffered ops to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err == nil && !w.mu.closed {
		if err := w.mu.w.Flush(); err != nil {
			w.mu.err = fmt.Errorf("chaos: history: %w", err)
		}
	}
	return w.mu.err
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return w.mu.err
	}
	w.mu.closed = true
	if err := w.mu.w.Flush(); err != nil && w.mu.err == nil {
		w.mu.err = fmt.Errorf("chaos: history: %w", err)
	}
	if err := w.mu.f.Close(); err != nil && w.mu.err == nil {
		w.mu.err = fmt.Errorf("chaos: history: %w", err)
	}
	return w.mu.err
}
