package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/subjects"
)

// TestLeaderReadFailover: the node leading the sessions stream is stopped
// and a leader read with a 30 s deadline is sent at once, through a node
// that stays up. It must return the record before its deadline: a request
// the stream leaves unanswered while it has no leader is sent again, so
// the read returns soon after a new leader is elected instead of waiting
// out the deadline. The figures are logged, not asserted.
func TestLeaderReadFailover(t *testing.T) {
	c := natstest.RestartableCluster(t)
	ensure(t, c.URL(), 3)
	stream := "KV_" + subjects.Default().SessionsBucket()
	lead := natstest.StreamLeader(t, c.Servers(), stream)
	st := open(t, c.Servers()[(lead+1)%3].ClientURL())
	id := uid("s")
	rev, err := st.CreateSession(ctx(t), sessionRec(id, "r1"))
	if err != nil {
		t.Fatal(err)
	}

	survivors := c.Servers()
	survivors[lead] = nil
	killed := time.Now()
	elected := make(chan time.Time, 1)
	go func() { elected <- natstest.NewLeader(survivors, stream, killed.Add(30*time.Second)) }()
	c.Stop(lead)
	stopped := time.Now()

	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := st.LeaderSession(rctx, id)
	returned := time.Now()
	if err != nil || got.Revision != rev || got.Record.OwnerRunID != "r1" {
		t.Fatalf("leader read after the leader stopped (%s): %+v %v", returned.Sub(killed), got, err)
	}
	e := <-elected
	t.Logf("stop took %s; the read returned %s after the stop began, %s after the new leader was seen (elected %s after the stop began)",
		stopped.Sub(killed), returned.Sub(killed), returned.Sub(e), e.Sub(killed))
}
