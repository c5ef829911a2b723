package jsx_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/jsx"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestLeaderGet(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"single":  func(t *testing.T) string { return natstest.Server(t).ClientURL() },
		"cluster": func(t *testing.T) string { return natstest.ClusterURL(natstest.Cluster(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			nc, js := natstest.Connect(t, url(t))
			replicas := 1
			if name == "cluster" {
				replicas = 3
			}
			ctx := t.Context()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: replicas, AllowDirect: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := jsx.LeaderGet(ctx, nc, "S", jsx.Query{LastFor: "s.a"}); !errors.Is(err, jsx.ErrNotFound) {
				t.Fatalf("empty subject: %v", err)
			}
			for i := range 5 {
				msg := nats.NewMsg("s.a")
				msg.Data = []byte{byte('0' + i)}
				msg.Header.Set("Nats-Msg-Id", string(msg.Data))
				if _, err := js.PublishMsg(ctx, msg); err != nil {
					t.Fatal(err)
				}
				got, err := jsx.LeaderGet(ctx, nc, "S", jsx.Query{LastFor: "s.a"})
				if err != nil || string(got.Data) != string(msg.Data) || got.Header.Get("Nats-Msg-Id") != string(msg.Data) {
					t.Fatalf("read %d: %+v %v", i, got, err)
				}
			}
			got, err := jsx.LeaderGet(ctx, nc, "S", jsx.Query{Seq: 2})
			if err != nil || got.Sequence != 2 || string(got.Data) != "1" {
				t.Fatalf("by seq: %+v %v", got, err)
			}
			got, err = jsx.LeaderGet(ctx, nc, "S", jsx.Query{Seq: 3, NextFor: "s.>"})
			if err != nil || got.Sequence != 3 {
				t.Fatalf("next for: %+v %v", got, err)
			}
		})
	}
}
