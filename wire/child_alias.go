package wire

import (
	"strconv"
	"strings"
)

// ParseChildAlias is the inverse of ChildAlias: the parent session ID,
// handle and generation of a child's alias, ok only for an alias
// ChildAlias makes (a session ID and a handle hold no dot; the generation
// is canonical and at least 1).
func ParseChildAlias(alias string) (parentSessionID, handle string, generation int, ok bool) {
	parts := strings.Split(alias, ".")
	if len(parts) != 4 || parts[0] != "child" || parts[1] == "" || parts[2] == "" {
		return "", "", 0, false
	}
	g, err := strconv.Atoi(parts[3])
	if err != nil || g < 1 || ChildAlias(parts[1], parts[2], g) != alias {
		return "", "", 0, false
	}
	return parts[1], parts[2], g, true
}
