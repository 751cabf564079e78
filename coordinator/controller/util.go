package controller

import "slices"

func sortInt32s(v []int32) { slices.Sort(v) }

// without returns v without x (a new slice; v is not modified).
func without(v []int32, x int32) []int32 {
	out := make([]int32, 0, len(v))
	for _, y := range v {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// minus returns the members of a not in b, in a's order.
func minus(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// subset reports whether every member of a is in b.
func subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// sameSet reports whether a and b hold the same members (each listed once).
func sameSet(a, b []int32) bool { return len(a) == len(b) && subset(a, b) }

// hasDuplicates reports whether a member of v is listed twice.
func hasDuplicates(v []int32) bool {
	for i, x := range v {
		if slices.Contains(v[:i], x) {
			return true
		}
	}
	return false
}

// orEmpty returns v, or a non-nil empty slice (a PartitionChangeRecord's "clear").
func orEmpty(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}
