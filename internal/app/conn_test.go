package app

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	got := Redact("nats://owner:s3cret@127.0.0.1:4222, nats://127.0.0.1:4223,nats://tok@h:1")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "owner:xxxxx@127.0.0.1:4222") || !strings.Contains(got, "nats://127.0.0.1:4223") {
		t.Fatalf("Redact: %s", got)
	}
	if _, err := Connect("nats://owner:s3cret@127.0.0.1:1", "t", nil); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Connect's error shows the password: %v", err)
	}
}
