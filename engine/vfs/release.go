package vfs

// parseRelease reads the major and minor numbers of a kernel release such as
// "6.18.44-fc-v1098" or "5.8.0".
func parseRelease(rel string) (major, minor int, ok bool) {
	num := func(s string) (int, string, bool) {
		n, i := 0, 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if n > 1<<20 {
				return 0, s, false
			}
			n = n*10 + int(s[i]-'0')
		}
		return n, s[i:], i > 0
	}
	major, rest, ok := num(rel)
	if !ok || len(rest) == 0 || rest[0] != '.' {
		return 0, 0, false
	}
	minor, _, ok = num(rest[1:])
	return major, minor, ok
}
