package subjects

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The session index bucket (<prefix>_index) holds, per session, one entry
// and its postings, and per listed value its hour markers:
//
//	e.<sessionID>                                  the entry
//	p.<dim>.<value>.<hour>.<order>.<sessionID>     a posting (empty value)
//	m.<dim>.<value>.<hour>                         an hour marker (empty value)
//	rebuild                                        the last rebuild request
//
// hour and order are the session's creation time, inverted so that
// ascending key order is newest first: hour is 99999999 minus the Unix
// hour, order 9999999999999 minus the Unix millisecond. A listing of one
// dimension's value reads its markers (which hours hold entries), then the
// postings of one hour at a time (docs/nats-layout.md, "The session index").
const (
	indexEntryPrefix   = "e."
	indexPostingPrefix = "p."
	indexMarkerPrefix  = "m."
	// IndexRebuildKey is the key of the index rebuild request.
	IndexRebuildKey = "rebuild"
)

// The dimensions of the session index a listing is served by.
const (
	DimAll      = "all"    // every session (value "_")
	DimAgent    = "agent"  // the deployment's agent
	DimDep      = "dep"    // the deployment ID
	DimState    = "state"  // the record's state
	DimTag      = "tag"    // a tag (value: TagValue of key and value)
	DimWait     = "wait"   // a durable wait kind, or "any"
	DimParent   = "parent" // the parent session ID
	DimDepState = "ds"     // the deployment and the state: DepState
	DimDepWait  = "dw"     // the deployment of a session with a durable wait
	AllValue    = "_"
	hourDigits  = 8
	ordDigits   = 13
	hourMax     = 99999999
	ordMax      = 9999999999999
)

// DepState is the value of a DimDepState posting: <deployment>=<state>.
func DepState(deployment, state string) string { return deployment + "=" + state }

// IndexBucket is the session index's KV bucket.
func (n Names) IndexBucket() string { return n.prefix + "_index" }

// IndexEntryKey is a session's entry key.
func IndexEntryKey(sessionID string) string { return indexEntryPrefix + sessionID }

// IndexEntries matches every entry key.
const IndexEntries = indexEntryPrefix + "*"

// TagValue is the posting value of a tag: a hash of its key and value (a
// tag's value may hold any bytes; a listing checks the entry's tags).
func TagValue(key, value string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + value))
	return "h" + hex.EncodeToString(sum[:10])
}

// IndexHour is the inverted hour token of a creation time.
func IndexHour(created time.Time) string {
	h := created.Unix() / 3600
	return pad(hourMax-min(max(h, 0), hourMax), hourDigits)
}

// IndexOrder is the inverted millisecond token of a creation time.
func IndexOrder(created time.Time) string {
	ms := created.UnixMilli()
	return pad(ordMax-min(max(ms, 0), ordMax), ordDigits)
}

func pad(v int64, n int) string {
	s := strconv.FormatInt(v, 10)
	return strings.Repeat("0", n-len(s)) + s
}

// Posting is one posting key's parts.
type Posting struct {
	Dim, Value, Hour, Order, SessionID string
}

// Key is the posting's key.
func (p Posting) Key() string {
	return indexPostingPrefix + p.Dim + "." + p.Value + "." + p.Hour + "." + p.Order + "." + p.SessionID
}

// Marker is the key of the posting's hour marker.
func (p Posting) Marker() string { return IndexMarkerKey(p.Dim, p.Value, p.Hour) }

// IndexPostings matches the postings of dim's value in one hour.
func IndexPostings(dim, value, hour string) string {
	return indexPostingPrefix + dim + "." + value + "." + hour + ".*.*"
}

// IndexMarkerKey is the hour marker of dim's value.
func IndexMarkerKey(dim, value, hour string) string {
	return indexMarkerPrefix + dim + "." + value + "." + hour
}

// IndexMarkers matches every hour marker of dim's value.
func IndexMarkers(dim, value string) string { return indexMarkerPrefix + dim + "." + value + ".*" }

// ParsePosting splits a posting key.
func ParsePosting(key string) (Posting, error) {
	rest, ok := strings.CutPrefix(key, indexPostingPrefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 5 || len(parts[2]) != hourDigits || len(parts[3]) != ordDigits || slices.Contains(parts, "") {
		return Posting{}, noMatch(key)
	}
	return Posting{Dim: parts[0], Value: parts[1], Hour: parts[2], Order: parts[3], SessionID: parts[4]}, nil
}

// ParseMarker splits a marker key into dimension, value and hour.
func ParseMarker(key string) (dim, value, hour string, err error) {
	rest, ok := strings.CutPrefix(key, indexMarkerPrefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 || len(parts[2]) != hourDigits || slices.Contains(parts, "") {
		return "", "", "", noMatch(key)
	}
	return parts[0], parts[1], parts[2], nil
}

// ParseIndexEntryKey is the session ID of an entry key.
func ParseIndexEntryKey(key string) (string, error) {
	id, ok := strings.CutPrefix(key, indexEntryPrefix)
	if !ok || id == "" || strings.ContainsAny(id, ".*> ") {
		return "", noMatch(key)
	}
	return id, nil
}

// CheckIndexValue checks a dimension value is one subject token.
func CheckIndexValue(v string) error {
	if v == "" || strings.ContainsAny(v, ".*> \t\r\n") {
		return fmt.Errorf("%w: index value %q", ErrBadToken, v)
	}
	return nil
}
