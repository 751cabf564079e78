package kafka

import "golang.org/x/sys/unix"

// diskSpace returns the total and usable bytes of the filesystem holding dir (-1, -1
// when statfs fails).
func diskSpace(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}
