package owner

import (
	"errors"
	"strings"
	"time"
)

// backoffList is the value of --quarantine-backoff and --step-retry-backoff
// over Config.QuarantineBackoff and Config.StepRetryBackoff:
// comma-separated non-negative Go durations, at least one.
type backoffList []time.Duration

func (b *backoffList) String() string {
	if b == nil {
		return ""
	}
	parts := make([]string, len(*b))
	for i, d := range *b {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Set parses the flag's value; an empty entry, a bad or negative duration
// is refused.
func (b *backoffList) Set(v string) error {
	var out backoffList
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		if d < 0 {
			return errors.New("a negative wait")
		}
		out = append(out, d)
	}
	*b = out
	return nil
}
