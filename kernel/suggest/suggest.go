// Package suggest finds the known name a mistyped one was probably meant to be, for
// "did you mean" hints in configuration errors.
package suggest

// Closest returns the candidate nearest to name by edit distance (insertions,
// deletions, substitutions and swaps of neighbours each cost 1), or "" when none is
// near enough: within a third of name's length, and at least 1.
func Closest(name string, candidates []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	for _, c := range candidates {
		if d := distance(name, c, bestD); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Hint is " (did you mean X?)" for Closest's answer, "" for none.
func Hint(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" && c != name {
		return " (did you mean " + c + "?)"
	}
	return ""
}

// distance is the optimal string alignment distance of a and b, or limit when it is
// limit or more (rows are abandoned once every cell reaches it).
func distance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		if rowMin >= limit {
			return limit
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit)
}
