package engine

// SpaceRecovered is the usable space at which a log directory whose appends found
// its file system full counts as writable again (UnwritableDirs). It is well above
// one batch, so that a directory freed by a few kilobytes is not declared writable
// only to fill up at the next append.
const SpaceRecovered = 8 << 20

// noteNoSpace records that an append to one of d's logs found the file system full.
func (d *logDir) noteNoSpace() {
	if !d.noSpace.Swap(true) {
		d.m.logger.Warn("log directory full: appends to it fail until space is freed", "dir", d.path)
	}
}

// UnwritableDirs returns the log directories that cannot take appends now: the
// offline ones (a failed fdatasync or truncation; until the Manager is reopened),
// and those an append found full (ErrNoSpace) that still have less than
// SpaceRecovered bytes usable. A full directory is checked with statfs(2) on each
// call, so the answer changes once space is freed, whether or not anything appends
// meanwhile; where the usable space is unknown (not Linux), a full directory stays
// unwritable until the Manager is reopened. Meant for a broker's heartbeat: a
// broker whose storage cannot take writes asks to be fenced, so that the
// controller moves its leaderships and takes it out of the ISRs.
func (m *Manager) UnwritableDirs() []string {
	var out []string
	for _, d := range m.dirs {
		switch {
		case d.offline.Load():
			out = append(out, d.path)
		case d.noSpace.Load():
			if _, usable := m.space(d.path); usable >= SpaceRecovered {
				// A concurrent append that fails again sets the flag again.
				if d.noSpace.CompareAndSwap(true, false) {
					m.logger.Info("log directory has space again", "dir", d.path, "usable_bytes", usable)
				}
				continue
			}
			out = append(out, d.path)
		}
	}
	return out
}
