package vfs

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// OpenJournal returns a CrashFS over inner whose model is journaled in the
// file at path, for a process that is killed (SIGKILL) to stand for a
// power loss: the journal survives the process (each record is one write(2)
// on an O_APPEND file; it is not fsynced, so it does not survive the
// machine). If the journal exists, what it records is applied first, exactly
// as Crash would have applied it at the moment the process died: every file
// is cut back to its last synced size and the unsynced creations and
// renames are undone. Then the journal starts empty.
//
// The journal must not lie inside a directory whose files it tracks is
// removed with RemoveAll; keep it outside the data directories.
func OpenJournal(inner FS, path string) (*CrashFS, error) {
	c := NewCrashFS(inner)
	data, err := ReadFile(inner, path)
	switch {
	case err == nil:
		for line := range bytes.Lines(data) {
			ev, ok := decodeEvent(line)
			if !ok {
				break // a torn last record
			}
			c.replayLocked(ev)
		}
		if err := c.cutLocked(nil); err != nil {
			return nil, fmt.Errorf("power-loss journal %s: %w", path, err)
		}
	case !IsNotExist(err):
		return nil, err
	}
	f, err := inner.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	c.journal = f
	return c, nil
}

// CloseJournal closes the journal of an OpenJournal FS (nothing for one in
// memory). The FS goes on working, unjournaled.
func (c *CrashFS) CloseJournal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.journal == nil {
		return nil
	}
	err := c.journal.Close()
	c.journal = nil
	return err
}

// encode is one journal line:
//
//	<kind> <quoted path> <quoted old path> <size> <had old 0|1> <base64 data>\n
func (ev event) encode() []byte {
	had := "0"
	if ev.hadOld {
		had = "1"
	}
	return []byte(fmt.Sprintf("%c %s %s %d %s %s\n", ev.kind, strconv.Quote(ev.path), strconv.Quote(ev.old),
		ev.size, had, base64.StdEncoding.EncodeToString(ev.data)))
}

func decodeEvent(line []byte) (event, bool) {
	s := string(line)
	if !strings.HasSuffix(s, "\n") || len(s) < 2 || s[1] != ' ' {
		return event{}, false
	}
	ev := event{kind: s[0]}
	rest := s[2 : len(s)-1]
	var err error
	if ev.path, rest, err = unquoteField(rest); err != nil {
		return event{}, false
	}
	if ev.old, rest, err = unquoteField(rest); err != nil {
		return event{}, false
	}
	f := strings.Split(rest, " ")
	if len(f) != 3 {
		return event{}, false
	}
	if ev.size, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return event{}, false
	}
	ev.hadOld = f[1] == "1"
	if ev.data, err = base64.StdEncoding.DecodeString(f[2]); err != nil {
		return event{}, false
	}
	return ev, true
}

func unquoteField(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	v, err := strconv.Unquote(q)
	return v, strings.TrimPrefix(s[len(q):], " "), err
}
