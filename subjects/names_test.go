package subjects

import (
	"errors"
	"testing"
)

func TestValidateDeployment(t *testing.T) {
	for _, ok := range []string{"v1", "blue", "A-b_9", "x123456789012345678901234567890123456789012345678901234567890123"[:64]} {
		if err := ValidateDeployment(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "latest", "LATEST", "Latest", "v1.2", "a b", "a*", "ü", string(make([]byte, 65))} {
		if err := ValidateDeployment(bad); !errors.Is(err, ErrBadDeployment) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func TestNames(t *testing.T) {
	n := Default()
	for got, want := range map[string]string{
		n.InboxStream():       "BATON_INBOX",
		n.EventsStream():      "BATON_EVENTS",
		n.SessionsBucket():    "baton_sessions",
		n.HooksBucket():       "baton_hooks",
		n.OwnersBucket():      "baton_owners",
		n.Inbox("tok"):        "baton.inbox.tok",
		n.Sched("S1"):         "baton.sched.S1",
		n.Events("S1"):        "baton.events.S1",
		n.Start("blue"):       "baton.deploy.blue.start",
		n.Wake("blue"):        "baton.deploy.blue.wake",
		n.Ingress("deliver"):  "baton.ingress.deliver",
		Consumer("S1", 7):     "S1-7",
		HookKey("C1=2E2"):     "tok.C1=2E2",
		MarkerKey("S1"):       "handoff.S1",
		LeaseKey("p1"):        "lease.p1",
		IndexKey("p1", "S1"):  "index.p1.S1",
		DeploymentKey("blue"): "deploy.blue",
	} {
		if got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
	custom, err := New("acme")
	if err != nil || custom.InboxStream() != "ACME_INBOX" || custom.Inbox("x") != "acme.inbox.x" {
		t.Fatalf("custom prefix: %v %v", custom, err)
	}
	if _, err := New("Bad.Prefix"); !errors.Is(err, ErrBadPrefix) {
		t.Fatalf("bad prefix accepted: %v", err)
	}
}

func TestParsers(t *testing.T) {
	n := Default()
	if tok, err := n.ParseInbox("baton.inbox.C1=2E2"); err != nil || tok != "C1=2E2" {
		t.Fatalf("ParseInbox: %q %v", tok, err)
	}
	for _, bad := range []string{"baton.inbox.", "baton.inbox.a.b", "other.inbox.x", "baton.events.x"} {
		if _, err := n.ParseInbox(bad); !errors.Is(err, ErrNoMatch) {
			t.Errorf("ParseInbox(%q) = %v", bad, err)
		}
	}
	if sid, err := n.ParseEvents(n.Events("S1")); err != nil || sid != "S1" {
		t.Fatalf("ParseEvents: %q %v", sid, err)
	}
	if sid, ep, err := ParseConsumer(Consumer("01AB-cd", 12)); err != nil || sid != "01AB-cd" || ep != 12 {
		t.Fatalf("ParseConsumer: %q %d %v", sid, ep, err)
	}
	for _, bad := range []string{"S1", "S1-", "-3", "S1-x"} {
		if _, _, err := ParseConsumer(bad); err == nil {
			t.Errorf("ParseConsumer(%q) accepted", bad)
		}
	}
	if pid, sid, err := ParseIndexKey(IndexKey("p1", "S1")); err != nil || pid != "p1" || sid != "S1" {
		t.Fatalf("ParseIndexKey: %v", err)
	}
	if tok, err := ParseHookKey(HookKey("t")); err != nil || tok != "t" {
		t.Fatalf("ParseHookKey: %v", err)
	}
	if pid, err := ParseLeaseKey(LeaseKey("p")); err != nil || pid != "p" {
		t.Fatalf("ParseLeaseKey: %v", err)
	}
	if d, err := ParseDeploymentKey(DeploymentKey("blue")); err != nil || d != "blue" {
		t.Fatalf("ParseDeploymentKey: %v", err)
	}
	if d, pid, err := ParseProcessKey(ProcessKey("blue", "p1")); err != nil || d != "blue" || pid != "p1" {
		t.Fatalf("ParseProcessKey: %q %q %v", d, pid, err)
	}
	if d, sid, err := ParseQuarantineKey(QuarantineKey("blue", "S1")); err != nil || d != "blue" || sid != "S1" {
		t.Fatalf("ParseQuarantineKey: %q %q %v", d, sid, err)
	}
	for _, bad := range []string{"proc.blue", "proc.blue.", "proc..p1", "proc.blue.p1.x", "index.blue.p1", "proc.*.p1"} {
		if _, _, err := ParseProcessKey(bad); err == nil {
			t.Errorf("ParseProcessKey(%q) accepted", bad)
		}
	}
	if _, _, err := ParseQuarantineKey(ProcessKey("blue", "S1")); err == nil {
		t.Error("ParseQuarantineKey accepted a registration key")
	}
}
