package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/samsa-broker/samsa/coordinator/metadata"
	"github.com/samsa-broker/samsa/engine/vfs"
	"github.com/samsa-broker/samsa/engine/vfs/errorfs"
)

func ent(index, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Type: raftpb.EntryNormal.Enum()}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func hardState(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
}

func testSnapshot(index, term uint64, data string, voters ...uint64) *raftpb.Snapshot {
	if len(voters) == 0 {
		voters = []uint64{1, 2, 3}
	}
	return &raftpb.Snapshot{Data: []byte(data), Metadata: &raftpb.SnapshotMetadata{
		Index: proto.Uint64(index), Term: proto.Uint64(term), ConfState: raftpb.EnsureConfState(&raftpb.ConfState{Voters: voters})}}
}

// storageState is everything a Storage shows raft, for comparisons.
type storageState struct {
	term, vote, commit  uint64
	snapIndex, snapTerm uint64
	voters              []uint64
	snapData            string
	first, last         uint64
	ents                map[uint64]string // index → "term/type/data"
}

func stateOf(t testing.TB, st Storage) storageState {
	t.Helper()
	hs, cs, err := st.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := st.Snapshot()
	first, _ := st.FirstIndex()
	last, _ := st.LastIndex()
	s := storageState{term: hs.GetTerm(), vote: hs.GetVote(), commit: hs.GetCommit(),
		snapIndex: snap.GetMetadata().GetIndex(), snapTerm: snap.GetMetadata().GetTerm(), voters: cs.GetVoters(),
		snapData: string(snap.GetData()), first: first, last: last, ents: map[uint64]string{}}
	if last >= first {
		ents, err := st.Entries(first, last+1, ^uint64(0))
		if err != nil {
			t.Fatalf("entries [%d, %d]: %v", first, last, err)
		}
		for _, e := range ents {
			s.ents[e.GetIndex()] = fmt.Sprintf("%d/%d/%s", e.GetTerm(), e.GetType(), e.GetData())
		}
		if len(ents) != int(last-first+1) {
			t.Fatalf("entries [%d, %d]: got %d", first, last, len(ents))
		}
	}
	if t0, err := st.Term(first - 1); err != nil {
		t.Fatalf("term of %d (before the first entry): %v", first-1, err)
	} else {
		s.ents[first-1] = fmt.Sprintf("base term %d", t0)
	}
	return s
}

// sameAs reports how got (a recovered disk storage) differs from want (the oracle):
// got may retain more of the log than want (removals a crash interrupted), never
// less, and agrees on everything want has.
func (got storageState) diff(want storageState) string {
	var d []string
	if got.term != want.term || got.vote != want.vote || got.commit != want.commit {
		d = append(d, fmt.Sprintf("hard state %d/%d/%d, want %d/%d/%d", got.term, got.vote, got.commit, want.term, want.vote, want.commit))
	}
	if got.snapIndex != want.snapIndex || got.snapTerm != want.snapTerm || got.snapData != want.snapData || !slices.Equal(got.voters, want.voters) {
		d = append(d, fmt.Sprintf("snapshot %d/%d, want %d/%d", got.snapIndex, got.snapTerm, want.snapIndex, want.snapTerm))
	}
	if got.last != want.last || got.first > want.first {
		d = append(d, fmt.Sprintf("log [%d, %d], want [%d, %d]", got.first, got.last, want.first, want.last))
	}
	for i := want.first - 1; i <= want.last; i++ {
		if i == want.first-1 && got.first < want.first {
			continue // a base term to compare only when the logs start at the same place
		}
		if got.ents[i] != want.ents[i] {
			d = append(d, fmt.Sprintf("entry %d: %q, want %q", i, got.ents[i], want.ents[i]))
		}
	}
	return strings.Join(d, "; ")
}

func openDisk(t testing.TB, fsys vfs.FS, dir string) *DiskStorage {
	t.Helper()
	d, err := OpenDiskStorage(dir, DiskOptions{FS: fsys})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return d
}

// TestStorageConformance runs one script against both implementations.
func TestStorageConformance(t *testing.T) {
	for _, impl := range []string{"mem", "disk"} {
		t.Run(impl, func(t *testing.T) {
			var st Storage
			if impl == "mem" {
				st = NewMemStorage()
			} else {
				st = openDisk(t, nil, t.TempDir())
				t.Cleanup(func() { st.Close() })
			}
			if fresh, _ := isFresh(st); !fresh {
				t.Fatal("a new storage is not fresh")
			}
			if err := st.Bootstrap(testSnapshot(1, 1, "boot")); err != nil {
				t.Fatal(err)
			}
			if err := st.Bootstrap(testSnapshot(1, 1, "boot")); !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("second bootstrap: %v", err)
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(st.Save(hardState(2, 1, 1), []*raftpb.Entry{ent(2, 2, ""), ent(3, 2, "a"), ent(4, 2, "b")}, true))
			must(st.Save(hardState(2, 1, 3), nil, false))
			// Replace the uncommitted suffix.
			must(st.Save(hardState(3, 2, 3), []*raftpb.Entry{ent(4, 3, "b'"), ent(5, 3, "c")}, true))
			s := stateOf(t, st)
			if s.first != 2 || s.last != 5 || s.ents[4] != "3/0/b'" || s.ents[1] != "base term 1" || s.commit != 3 {
				t.Fatalf("after saves: %+v", s)
			}
			// A committed entry is never replaced.
			if err := st.Save(nil, []*raftpb.Entry{ent(3, 4, "x")}, true); err == nil {
				t.Fatal("replacing a committed entry was accepted")
			}
			if impl == "disk" {
				// The refused write marks the storage failed, as any write error does.
				if err := st.Save(hardState(3, 2, 4), nil, true); !errors.Is(err, ErrStorageFailed) {
					t.Fatalf("write after a failure: %v", err)
				}
				return
			}
		})
	}
}

// TestStorageCompactionAndSnapshots checks compaction behind snapshots, reads of
// compacted and missing entries, a snapshot from the leader, and recovery of each
// state from disk.
func TestStorageCompactionAndSnapshots(t *testing.T) {
	dir := t.TempDir()
	mem, disk := NewMemStorage(), openDisk(t, nil, dir)
	defer func() { disk.Close() }()
	both := func(f func(st Storage) error) {
		t.Helper()
		for _, st := range []Storage{mem, disk} {
			if err := f(st); err != nil {
				t.Fatalf("%T: %v", st, err)
			}
		}
	}
	check := func(what string) {
		t.Helper()
		want := stateOf(t, mem)
		if d := stateOf(t, disk).diff(want); d != "" {
			t.Fatalf("%s: disk differs: %s", what, d)
		}
		disk.Close()
		disk = openDisk(t, nil, dir)
		got := stateOf(t, disk)
		if d := got.diff(want); d != "" || got.first != want.first {
			t.Fatalf("%s: disk after reopen differs: %s (first %d, want %d)", what, d, got.first, want.first)
		}
	}
	both(func(st Storage) error { return st.Bootstrap(testSnapshot(1, 1, "boot")) })
	next := uint64(2)
	appendN := func(n int, term uint64) {
		for i := 0; i < n; i++ {
			idx := next
			both(func(st Storage) error {
				return st.Save(hardState(term, 1, idx), []*raftpb.Entry{ent(idx, term, fmt.Sprintf("e%d", idx))}, true)
			})
			next++
		}
	}
	appendN(10, 2)
	check("ten entries")
	both(func(st Storage) error {
		return st.CreateSnapshot(6, cloneConfState(testSnapshot(1, 1, "").Metadata.ConfState), []byte("s6"))
	})
	check("snapshot at 6")
	// The first snapshot compacts to the bootstrap snapshot (1): nothing goes yet.
	if first, _ := mem.FirstIndex(); first != 2 {
		t.Fatalf("first index %d after the first snapshot, want 2", first)
	}
	appendN(10, 2)
	both(func(st Storage) error {
		return st.CreateSnapshot(15, cloneConfState(testSnapshot(1, 1, "").Metadata.ConfState), []byte("s15"))
	})
	check("snapshot at 15")
	if first, _ := mem.FirstIndex(); first != 7 {
		t.Fatalf("first index %d after the second snapshot, want 7 (behind the previous snapshot)", first)
	}
	if _, err := disk.Entries(5, 8, 1<<20); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compacted read: %v", err)
	}
	if _, err := disk.Entries(7, 30, 1<<20); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("read past the end: %v", err)
	}
	if ents, err := disk.Entries(7, 22, 1); err != nil || len(ents) != 1 {
		t.Fatalf("size-limited read: %d entries, %v", len(ents), err)
	}
	names := func() (segs, snaps int) {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			switch filepath.Ext(de.Name()) {
			case segSuffix:
				segs++
			case snapSuffix:
				snaps++
			}
		}
		return
	}
	if segs, snaps := names(); segs != 2 || snaps != 1 {
		t.Fatalf("%d segments and %d snapshots on disk after compaction, want 2 and 1", segs, snaps)
	}
	// A snapshot from the leader replaces the log.
	both(func(st Storage) error { return st.ApplySnapshot(testSnapshot(40, 5, "leader's")) })
	both(func(st Storage) error { return st.Save(hardState(5, 0, 40), nil, true) })
	check("snapshot from the leader")
	if segs, snaps := names(); segs != 1 || snaps != 1 {
		t.Fatalf("%d segments and %d snapshots on disk after a received snapshot, want 1 and 1", segs, snaps)
	}
	next = 41
	appendN(3, 5)
	check("entries after a received snapshot")
}

// TestDiskLocked: a second open of the directory fails while the first holds it.
func TestDiskLocked(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, nil, dir)
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	d.Close()
	openDisk(t, nil, dir).Close()
}

// diskWithEntries returns a directory holding a bootstrapped log with n entries,
// one Save each, and the active segment's path.
func diskWithEntries(t *testing.T, n int) (string, string) {
	t.Helper()
	dir := t.TempDir()
	d := openDisk(t, nil, dir)
	if err := d.Bootstrap(testSnapshot(1, 1, "boot")); err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i < uint64(2+n); i++ {
		if err := d.Save(hardState(2, 1, i-1), []*raftpb.Entry{ent(i, 2, fmt.Sprintf("entry-%d", i))}, true); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	return dir, filepath.Join(dir, segName(1))
}

func TestDiskTornTail(t *testing.T) {
	dir, seg := diskWithEntries(t, 5)
	full, _ := os.ReadFile(seg)
	// Every cut inside the last frame is a torn write: the entries before it stay.
	frame := len(appendWriteFrame(nil, hardState(2, 1, 5), []*raftpb.Entry{ent(6, 2, "entry-6")}))
	for cut := len(full) - frame + 1; cut < len(full); cut++ {
		if err := os.WriteFile(seg, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		d := openDisk(t, nil, dir)
		s := stateOf(t, d)
		if s.last != 5 || s.ents[5] != "2/0/entry-5" {
			t.Fatalf("cut at %d: log ends at %d (%q)", cut, s.last, s.ents[5])
		}
		d.Close()
		if fi, _ := os.Stat(seg); fi.Size() != int64(len(full)-frame) {
			t.Fatalf("cut at %d: torn tail not truncated: %d bytes", cut, fi.Size())
		}
	}
	// A zero-filled tail (a file extended but never written) is torn too.
	if err := os.WriteFile(seg, append(slices.Clone(full), make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	d := openDisk(t, nil, dir)
	if s := stateOf(t, d); s.last != 6 {
		t.Fatalf("zero tail: log ends at %d", s.last)
	}
	d.Close()
}

func TestDiskCorruptionIsAnError(t *testing.T) {
	dir, seg := diskWithEntries(t, 5)
	full, _ := os.ReadFile(seg)
	// A flipped byte in any frame but the last is corruption, never a silent cut.
	frame := len(appendWriteFrame(nil, hardState(2, 1, 5), []*raftpb.Entry{ent(6, 2, "entry-6")}))
	for at := segHeaderSize; at < len(full)-frame; at += 3 {
		b := slices.Clone(full)
		b[at] ^= 0x40
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDiskStorage(dir, DiskOptions{})
		if !errors.Is(err, ErrCorrupt) {
			if d != nil {
				d.Close()
			}
			t.Fatalf("byte %d flipped: open gives %v, want ErrCorrupt", at, err)
		}
	}
	// Garbage after a bad frame is corruption, not a torn write.
	b := slices.Clone(full)
	b[len(b)-frame+10] ^= 1
	b = append(b, 1, 2, 3)
	os.WriteFile(seg, b, 0o644)
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad frame followed by garbage: %v", err)
	}
	// A damaged header, a damaged snapshot, a missing snapshot.
	b = slices.Clone(full)
	b[9] ^= 1
	os.WriteFile(seg, b, 0o644)
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad segment header: %v", err)
	}
	os.WriteFile(seg, full, 0o644)
	snap := filepath.Join(dir, snapName(1))
	sb, _ := os.ReadFile(snap)
	sb[len(sb)/2] ^= 1
	os.WriteFile(snap, sb, 0o644)
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad snapshot: %v", err)
	}
	os.Remove(snap)
	if _, err := OpenDiskStorage(dir, DiskOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("segments without a snapshot: %v", err)
	}
}

// TestDiskCrashMatchesMemory runs random operations on a DiskStorage over a
// power-loss model (vfs.CrashFS, torn crashes) and on a MemStorage, crashes both
// at random points, and checks that what the disk recovers is exactly what the
// memory model says may survive: the durable state plus a prefix of the unsynced
// writes.
func TestDiskCrashMatchesMemory(t *testing.T) {
	seeds := 40
	if longRun() {
		seeds = 2000
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		prog := make([]byte, 200)
		for i := range prog {
			prog[i] = byte(rng.Uint32())
		}
		if err := runStorageProgram(t, prog, false); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// runStorageProgram interprets prog as storage operations (see opSave...), checks
// the disk against the memory model after every crash, and returns the first
// discrepancy. With corrupt, the last crash also damages a byte and the reopen
// must fail with ErrCorrupt or recover a state the model allows.
func runStorageProgram(t testing.TB, prog []byte, corrupt bool) error {
	dir := t.TempDir()
	cfs := vfs.NewCrashFS(vfs.Default)
	disk, err := OpenDiskStorage(dir, DiskOptions{FS: cfs})
	if err != nil {
		return err
	}
	defer func() { disk.Close() }()
	mem := NewMemStorage()
	boot := testSnapshot(1, 1, "boot")
	if err := disk.Bootstrap(boot); err != nil {
		return err
	}
	mem.Bootstrap(boot)
	next := func() byte {
		if len(prog) == 0 {
			return 0
		}
		b := prog[0]
		prog = prog[1:]
		return b
	}
	apply := func(f func(Storage) error) error {
		errM, errD := f(mem), f(disk)
		if (errM == nil) != (errD == nil) {
			return fmt.Errorf("memory says %v, disk says %v", errM, errD)
		}
		return nil
	}
	for len(prog) > 0 {
		hs, _, _ := mem.InitialState()
		first, _ := mem.FirstIndex()
		last, _ := mem.LastIndex()
		snap, _ := mem.Snapshot()
		term, commit := hs.GetTerm(), hs.GetCommit()
		var err error
		switch op := next() % 8; op {
		case 0, 1, 2: // append entries, maybe replacing an uncommitted suffix, maybe a new term
			from := last + 1
			if k := uint64(next() % 4); k > 0 && last > commit {
				from = max(commit+1, last+1-k)
			}
			if next()%4 == 0 {
				term++
			}
			n := 1 + int(next()%4)
			var ents []*raftpb.Entry
			for i := 0; i < n; i++ {
				ents = append(ents, ent(from+uint64(i), term, strings.Repeat("x", int(next()%50))))
			}
			err = apply(func(st Storage) error { return st.Save(hardState(term, 1, commit), ents, true) })
		case 3, 4: // advance the commit index without sync (raft's MustSync false)
			if last > commit {
				c := commit + 1 + uint64(next())%(last-commit)
				err = apply(func(st Storage) error { return st.Save(hardState(term, 1, c), nil, false) })
			}
		case 5: // snapshot of an applied index
			lo := max(snap.GetMetadata().GetIndex(), first-1) + 1
			if commit >= lo {
				i := lo + uint64(next())%(commit-lo+1)
				data := []byte(fmt.Sprintf("snap-%d", i))
				err = apply(func(st Storage) error { return st.CreateSnapshot(i, testSnapshot(1, 1, "").Metadata.ConfState, data) })
			}
		case 6: // a snapshot from the leader, ahead of the log
			i := max(commit, snap.GetMetadata().GetIndex()) + 1 + uint64(next()%5)
			t2 := term + uint64(next()%2)
			s := testSnapshot(i, t2, fmt.Sprintf("leader-%d", i))
			err = apply(func(st Storage) error {
				if err := st.ApplySnapshot(s); err != nil {
					return err
				}
				return st.Save(hardState(t2, 0, i), nil, true)
			})
		case 7: // crash, restart, recover, compare
			rnd := mrand.New(mrand.NewSource(int64(next())))
			if err := cfs.CrashTorn(rnd); err != nil {
				return err
			}
			disk.Close()
			cfs.Restart()
			if corrupt && len(prog) == 0 {
				return corruptAndOpen(cfs, dir, next())
			}
			disk, err = OpenDiskStorage(dir, DiskOptions{FS: cfs})
			if err != nil {
				return fmt.Errorf("recovery after a crash: %w", err)
			}
			got := stateOf(t, disk)
			var diffs []string
			found := false
			for k := 0; k <= mem.Unsynced(); k++ {
				cand := mem.crashed(k)
				if d := got.diff(stateOf(t, cand)); d == "" {
					mem, found = cand, true
					break
				} else {
					diffs = append(diffs, fmt.Sprintf("keeping %d: %s", k, d))
				}
			}
			if !found {
				return fmt.Errorf("recovered state is no crash state of the model:\n  %s", strings.Join(diffs, "\n  "))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// corruptAndOpen flips one byte of one raft file and reopens: the result must be
// ErrCorrupt or a storage (a damaged last frame reads as a torn write); never a
// panic.
func corruptAndOpen(fsys vfs.FS, dir string, pick byte) error {
	des, _ := os.ReadDir(dir)
	var files []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), segSuffix) || strings.HasSuffix(de.Name(), snapSuffix) {
			files = append(files, filepath.Join(dir, de.Name()))
		}
	}
	if len(files) > 0 {
		f := files[int(pick)%len(files)]
		b, _ := os.ReadFile(f)
		if len(b) > 0 {
			b[(int(pick)*7919)%len(b)] ^= 1 << (pick % 8)
			os.WriteFile(f, b, 0o644)
		}
	}
	d, err := OpenDiskStorage(dir, DiskOptions{FS: fsys})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("a damaged byte gives %v, want ErrCorrupt", err)
		}
		return nil
	}
	return d.Close()
}

// FuzzStorageRecovery: any program of writes and crashes recovers to a state the
// memory model allows; a damaged byte is ErrCorrupt or reads as a torn tail.
func FuzzStorageRecovery(f *testing.F) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		prog := make([]byte, 64)
		for i := range prog {
			prog[i] = byte(rng.Uint32())
		}
		f.Add(prog, seed%2 == 0)
	}
	f.Add([]byte{0, 0, 0, 7, 3, 7, 5, 7}, false)
	f.Fuzz(func(t *testing.T, prog []byte, corrupt bool) {
		if len(prog) > 512 {
			prog = prog[:512]
		}
		if err := runStorageProgram(t, prog, corrupt); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDiskSyncFailure: a failed fdatasync fails the Save and every later write,
// and the quorum stops without sending the Ready's messages.
func TestDiskSyncFailure(t *testing.T) {
	efs := newErrorFS()
	d, err := OpenDiskStorage(t.TempDir(), DiskOptions{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rec := &recordingTransport{}
	q, err := New(Config{NodeID: 1, Voters: []int32{1, 2, 3}}, d, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.HandleReady(); err != nil {
		t.Fatal(err)
	}
	// Pre-votes change no hard state and go out unsynced; a granted pre-vote makes
	// the voter a candidate, whose new term and vote must reach the disk before its
	// votes are sent.
	for i := 0; i < 3*DefaultElectionTicks && len(rec.msgs) == 0; i++ {
		q.Tick()
		if err := q.HandleReady(); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.msgs) == 0 || rec.msgs[0].GetType() != raftpb.MsgPreVote {
		t.Fatalf("no pre-vote: %v", rec.msgs)
	}
	failSyncs(efs)
	rec.msgs = nil
	q.Step(&raftpb.Message{Type: raftpb.MsgPreVoteResp.Enum(), From: proto.Uint64(RaftID(2)), To: proto.Uint64(RaftID(1)),
		Term: proto.Uint64(rec0Term(q) + 1)})
	err = q.HandleReady()
	if !errors.Is(err, ErrStopped) || !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("campaign on a failing disk: %v (messages sent: %d)", err, len(rec.msgs))
	}
	if len(rec.msgs) != 0 {
		t.Fatalf("%d messages sent although their hard state did not reach the disk: %v", len(rec.msgs), rec.msgs)
	}
	if err := q.HandleReady(); !errors.Is(err, ErrStopped) {
		t.Fatalf("after the failure: %v", err)
	}
	if r := <-q.Propose([]metadata.Record{topic("x")}); r.Err == nil {
		t.Fatal("a stopped quorum accepted a proposal")
	}
	if _, err := q.WaitCommitted(context.Background(), 1<<40); !errors.Is(err, ErrStopped) {
		t.Fatalf("WaitCommitted on a stopped quorum: %v", err)
	}
	if err := d.Save(hardState(9, 1, 1), nil, true); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("write after a failed sync: %v", err)
	}
}

func rec0Term(q *Quorum) uint64 { _, term := q.Leader(); return term }

type recordingTransport struct{ msgs []*raftpb.Message }

func (r *recordingTransport) Send(msgs []*raftpb.Message) { r.msgs = append(r.msgs, msgs...) }

var _ = bytes.Equal

// TestDiskCrashInsideOperations fails the n-th mutating file-system operation of a
// fixed program (every n in turn), crashes the machine there, and checks that the
// recovered storage is a crash state of the memory model either before or after the
// operation that failed: no step inside Bootstrap, Save, CreateSnapshot or
// ApplySnapshot leaves anything else.
func TestDiskCrashInsideOperations(t *testing.T) {
	cs := testSnapshot(1, 1, "").Metadata.ConfState
	prog := []func(Storage) error{
		func(st Storage) error { return st.Bootstrap(testSnapshot(1, 1, "boot")) },
		func(st Storage) error {
			return st.Save(hardState(2, 1, 1), []*raftpb.Entry{ent(2, 2, ""), ent(3, 2, "a"), ent(4, 2, "b")}, true)
		},
		func(st Storage) error { return st.Save(hardState(2, 1, 3), nil, false) },
		func(st Storage) error { return st.CreateSnapshot(3, cs, []byte("s3")) },
		func(st Storage) error {
			return st.Save(hardState(3, 2, 4), []*raftpb.Entry{ent(5, 3, "c"), ent(6, 3, "d")}, true)
		},
		func(st Storage) error { return st.Save(hardState(3, 2, 6), nil, false) },
		func(st Storage) error { return st.CreateSnapshot(5, cs, []byte("s5")) },
		func(st Storage) error { return st.Save(hardState(3, 2, 6), []*raftpb.Entry{ent(7, 3, "e")}, true) },
		func(st Storage) error { return st.ApplySnapshot(testSnapshot(20, 4, "leader's")) },
		func(st Storage) error { return st.Save(hardState(4, 0, 20), []*raftpb.Entry{ent(21, 4, "f")}, true) },
	}
	ops := errorfs.OpCreate | errorfs.OpWrite | errorfs.OpSync | errorfs.OpRename | errorfs.OpSyncDir | errorfs.OpTruncate | errorfs.OpRemove
	for _, torn := range []bool{false, true} {
		crashInsideOperations(t, prog, ops, torn)
	}
}

func crashInsideOperations(t *testing.T, prog []func(Storage) error, ops errorfs.Op, torn bool) {
	for n := int64(0); ; n++ {
		dir := t.TempDir()
		cfs := vfs.NewCrashFS(vfs.Default)
		efs := errorfs.New(cfs, 1)
		disk, err := OpenDiskStorage(dir, DiskOptions{FS: efs})
		if err != nil {
			t.Fatal(err)
		}
		efs.Add(errorfs.Rule{Ops: ops, After: n, Limit: 1})
		mem := NewMemStorage()
		var cands []*MemStorage
		failed := -1
		for i, op := range prog {
			before := crashStates(mem)
			if err := op(mem); err != nil {
				t.Fatalf("model: op %d: %v", i, err)
			}
			if err := op(disk); err != nil {
				cands, failed = append(before, crashStates(mem)...), i
				break
			}
		}
		if failed < 0 {
			disk.Close()
			if n < 5 {
				t.Fatalf("only %d file-system operations", n)
			}
			t.Logf("crashed (torn %v) inside each of %d file-system operations", torn, n)
			return // n passed the program's last operation
		}
		crash := cfs.Crash
		if torn {
			crash = func() error { return cfs.CrashTorn(mrand.New(mrand.NewSource(n))) }
		}
		if err := crash(); err != nil {
			t.Fatal(err)
		}
		disk.Close()
		cfs.Restart()
		rec, err := OpenDiskStorage(dir, DiskOptions{FS: cfs})
		if err != nil {
			t.Fatalf("failing operation %d (op %d): recovery: %v", n, failed, err)
		}
		got := stateOf(t, rec)
		ok := false
		var diffs []string
		for _, c := range cands {
			if fresh, _ := isFresh(c); fresh && got.snapIndex == 0 && got.last == 0 {
				ok = true
				break
			}
			if d := got.diff(stateOf(t, c)); d == "" {
				ok = true
				break
			} else {
				diffs = append(diffs, d)
			}
		}
		rec.Close()
		if !ok {
			t.Fatalf("failing operation %d (op %d): recovered state is neither before nor after it:\n  %s", n, failed, strings.Join(diffs, "\n  "))
		}
	}
}

// crashStates returns every state a crash of m could leave.
func crashStates(m *MemStorage) []*MemStorage {
	var out []*MemStorage
	for k := 0; k <= m.Unsynced(); k++ {
		out = append(out, m.crashed(k))
	}
	return out
}

// TestFailureResolvesQueuedProposals: a proposal queued while leading is answered
// when the voter fails before appending it (here: a message from a newer term
// whose hard state cannot be synced).
func TestFailureResolvesQueuedProposals(t *testing.T) {
	efs := newErrorFS()
	d, err := OpenDiskStorage(t.TempDir(), DiskOptions{FS: efs})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rec := &recordingTransport{}
	q, err := New(Config{NodeID: 1, Voters: []int32{1, 2, 3}}, d, rec)
	if err != nil {
		t.Fatal(err)
	}
	step := func(typ raftpb.MessageType, from int32, term uint64) {
		t.Helper()
		q.Step(&raftpb.Message{Type: typ.Enum(), From: proto.Uint64(RaftID(from)), To: proto.Uint64(RaftID(1)), Term: proto.Uint64(term)})
		if err := q.HandleReady(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3*DefaultElectionTicks && len(rec.msgs) == 0; i++ {
		q.Tick()
		if err := q.HandleReady(); err != nil {
			t.Fatal(err)
		}
	}
	step(raftpb.MsgPreVoteResp, 2, rec0Term(q)+1)
	step(raftpb.MsgVoteResp, 2, rec0Term(q))
	if !q.IsLeader() {
		t.Fatalf("not leader: %+v", q.Status())
	}
	_, term := q.Leader()
	ch := q.Propose([]metadata.Record{topic("queued")})
	failSyncs(efs)
	q.Step(&raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(RaftID(3)), To: proto.Uint64(RaftID(1)), Term: proto.Uint64(term + 1)})
	if err := q.HandleReady(); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("HandleReady: %v", err)
	}
	select {
	case r := <-ch:
		if !errors.Is(r.Err, ErrStopped) {
			t.Fatalf("queued proposal: %+v", r)
		}
	default:
		t.Fatal("the queued proposal was never answered")
	}
}
