package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func envelope(kind string, data any) Event {
	e, err := NewEvent(kind, data)
	if err != nil {
		panic(err)
	}
	e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID = "sess-1", 7, "run-1", "dep-1"
	e.Time = time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	return e
}

func rawEvent(kind, data string) []byte {
	return []byte(`{"sessionId":"sess-1","seq":7,"time":"2026-02-03T04:05:06Z","ownerRunId":"run-1",` +
		`"deploymentId":"dep-1","kind":"` + kind + `","v":1,"data":` + data + `}`)
}

var ref = NewBlobRef([]byte("long answer"))

// One valid value of every built-in kind.
var builtinSamples = map[string]any{
	EventSessionStarted:     SessionStarted{SessionID: "sess-1", DeploymentID: "dep-1", Tokens: []string{"sess-1", "C123.456"}},
	EventCommandApplied:     CommandApplied{CommandID: "c1", Seq: 42, Kind: "deliver"},
	EventCommandRejected:    CommandRejected{CommandID: "c5", Seq: 51, Reason: RejectAgentMismatch},
	EventCommandSuperseded:  CommandSuperseded{CommandID: "c6", Seq: 52, By: 53},
	EventTurnRolledBack:     TurnRolledBack{TurnID: "t1", Calls: []CallRef{{Name: "charge", Step: 1, Position: 0}, {Name: "email", Step: 2, Position: 1}}},
	EventTurnStarted:        TurnStarted{TurnID: "t1", CommandID: "c1"},
	EventTurnStep:           TurnStep{TurnID: "t1", Step: 2},
	EventTurnStepRetried:    TurnStepRetried{TurnID: "t1", Step: 2, Attempt: 2, Code: CodeAgentUnavailable},
	EventMessageOutput:      MessageOutput{TurnID: "t1", Text: "hello"},
	EventInputRequested:     InputRequested{RequestID: "r1", Question: "Which city?"},
	EventAuthRequested:      AuthRequested{AttemptID: "a1", Provider: "google"},
	EventTaskStarted:        TaskStarted{TaskID: "t1", Name: "crawl"},
	EventTaskCompleted:      TaskCompleted{TaskID: "t1"},
	EventTurnCompleted:      TurnCompleted{TurnID: "t1"},
	EventLimitReached:       LimitReached{TurnID: "t1", Limit: LimitStepsPerTurn, Used: 50, Max: 50},
	EventTurnCancelled:      TurnCancelled{TurnID: "t1", CommandID: "c2"},
	EventSessionWaiting:     SessionWaiting{Reason: WaitMessage},
	EventSessionPaused:      SessionPaused{CommandID: "c3"},
	EventSessionResumed:     SessionResumed{},
	EventSessionTagged:      SessionTagged{Tags: map[string]string{"env": "prod", "note": "", "owner": "Zoë"}},
	EventHandoffStarted:     HandoffStarted{HandoffID: "h1", TargetDeploymentID: "dep-2", Trigger: CommandRef{CommandID: "c4", Seq: 50}},
	EventHandoffSkipped:     HandoffSkipped{Reason: SkipBusy, CommandID: "c4", Seq: 50, DeploymentID: "dep-1", TargetDeploymentID: "dep-2"},
	EventHandoffCompleted:   HandoffCompleted{HandoffID: "h1", FromDeploymentID: "dep-1", ToDeploymentID: "dep-2", Epoch: 3},
	EventHandoffFailed:      HandoffFailed{HandoffID: "h1", TargetDeploymentID: "dep-2", Reason: "no responders"},
	EventWaitCancelled:      WaitCancelled{Wait: WaitInput, RequestID: "r1", Reason: "forced move"},
	EventStepInterrupted:    StepInterrupted{TurnID: "t1", Step: 3, Reason: "cancel"},
	EventWireRejected:       WireRejected{Seq: 9, Reason: "wire: unknown version", Version: 2, CommandID: "c9"},
	EventSessionEnded:       SessionEnded{Reason: EndDone},
	EventErrorKind:          ErrorData{Message: "model unavailable", Code: "upstream"},
	EventSessionQuarantined: SessionQuarantined{Attempts: 3, Error: "process_died", DeploymentID: "dep-1"},
	EventSessionRetried:     SessionRetried{DeploymentID: "dep-2"},
	EventChildStarted:       ChildStarted{Handle: "researcher", ChildSessionID: "sess-2", DeploymentID: "dep-1"},
	EventChildCompleted:     ChildCompleted{Handle: "researcher", ChildSessionID: "sess-2", TurnID: "t1", Outcome: ChildDone},
	EventChildWaiting:       ChildWaitingEvent{Handle: "researcher", ChildSessionID: "sess-2", RequestID: "r1", Question: "Which city?"},
	EventChildClosed:        ChildClosed{Handle: "researcher", ChildSessionID: "sess-2"},
}

// versionedSamples are bodies of the built-in data versions above 1 (also
// part of the corpus of TestEventSchemaAgreement).
var versionedSamples = []EventBody{
	TaskCompletedV2{TaskID: "t1", Kind: "crawl", Result: json.RawMessage(`{"rows":3}`)},
	TurnCompletedV2{TurnID: "t1", StopReason: StopLimit, Usage: Usage{InputTokens: 3, CostUSD: 0.5}},
	TurnCompletedV3{TurnID: "t1", StopReason: StopError, Usage: Usage{InputTokens: 3}},
	SessionEndedV2{Reason: EndTerminated},
	SessionEndedV3{Reason: EndClosed},
	SessionEndedV4{Reason: EndTerminated, By: EndedByUser, Message: "Thanks, that is all."},
	ChildCompletedV2{Handle: "researcher", ChildSessionID: "sess-2", TurnID: "none", Outcome: ChildFailed,
		Error: &ChildError{Code: CodeChildUnavailable, Message: "no owner of deployment gray answered"}},
	HandoffSkippedV2{Reason: SkipChild, CommandID: "c4", Seq: 50, DeploymentID: "dep-1", TargetDeploymentID: "dep-2"},
	SessionQuarantinedV2{Attempts: 1, Error: "session: checkpoint unreadable", DeploymentID: "dep-1", OutboxLost: true, CheckpointRef: ref},
}

// Every built-in data version above 1 has a sample.
func TestVersionedSamples(t *testing.T) {
	reg := DefaultEvents()
	have := map[string]bool{}
	for _, b := range versionedSamples {
		e, err := NewBodyEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		have[e.Kind+".v"+itoa(e.V)] = true
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(e.Kind, nil).Time
		if _, err := EncodeEvent(reg, e); err != nil {
			t.Errorf("%s v%d: %v", e.Kind, e.V, err)
		}
	}
	for _, k := range reg.Kinds() {
		for v := 2; v <= reg.Version(k); v++ {
			if !have[k+".v"+itoa(v)] {
				t.Errorf("no sample of %s data version %d", k, v)
			}
		}
	}
}

func TestBuiltinKinds(t *testing.T) {
	got := DefaultEvents().Kinds()
	want := make([]string, 0, len(builtinSamples))
	for k := range builtinSamples {
		want = append(want, k)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("built-in kinds\n got %v\nwant %v", got, want)
	}
}

func TestBuiltinEventsRoundTrip(t *testing.T) {
	reg := DefaultEvents()
	for kind, data := range builtinSamples {
		t.Run(kind, func(t *testing.T) {
			e := envelope(kind, data)
			b, err := EncodeEvent(reg, e)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeEvent(reg, b)
			if err != nil || !reflect.DeepEqual(back, e) {
				t.Fatalf("%v\n got %+v\nwant %+v", err, back, e)
			}
			typed := reflect.New(reflect.TypeOf(data))
			if err := json.Unmarshal(back.Data, typed.Interface()); err != nil || !reflect.DeepEqual(typed.Elem().Interface(), data) {
				t.Fatalf("data %s does not decode to %+v", back.Data, data)
			}
		})
	}
}

// Every enumerated reason the Go constants name passes the generated schema.
func TestBuiltinEnumerations(t *testing.T) {
	reg := DefaultEvents()
	var events []Event
	for _, r := range []string{EndDone, EndExpired, EndFailed, EndCancelled} {
		events = append(events, envelope(EventSessionEnded, SessionEnded{Reason: r}))
	}
	for _, r := range []string{SkipBusy, SkipQueued, SkipInput, SkipAuthorization, SkipTask, SkipPaused, SkipChild} {
		e, err := NewBodyEvent(LowestHandoffSkipped(HandoffSkipped{Reason: r, CommandID: "c", Seq: 1, DeploymentID: "d1", TargetDeploymentID: "d2"}))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	for _, r := range []string{EndTerminated, EndClosed} {
		e, err := NewSessionEnded(r)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	for _, o := range []string{ChildDone, ChildFailed, ChildCancelled} {
		events = append(events, envelope(EventChildCompleted, ChildCompleted{Handle: "h", ChildSessionID: "s", TurnID: "t", Outcome: o}))
	}
	for _, r := range []string{WaitMessage, WaitInput, WaitAuthorization, WaitTask} {
		events = append(events, envelope(EventSessionWaiting, SessionWaiting{Reason: r}))
	}
	for _, e := range events {
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(e.Kind, nil).Time
		if _, err := EncodeEvent(reg, e); err != nil {
			t.Errorf("%s %s: %v", e.Kind, e.Data, err)
		}
	}
}

// A malformed-but-JSON event is caught at the boundary by a reader with the
// registry, with a typed error; a reader without it passes the data through.
// malformedEventData are data a registry-aware reader rejects (also part of
// the corpus of TestEventSchemaAgreement).
var malformedEventData = func() []struct{ kind, data string } {
	return []struct{ kind, data string }{
		{EventCommandApplied, `{"commandId":"c","seq":"3","kind":"deliver"}`},
		{EventCommandApplied, `{"commandId":"c","kind":"deliver"}`},
		{EventCommandApplied, `{"commandId":"c","seq":0,"kind":"deliver"}`},
		{EventCommandApplied, `{"commandId":"c","seq":3,"kind":"deliver","extra":true}`},
		{EventCommandApplied, `{"CommandID":"c","seq":3,"kind":"deliver"}`},
		{EventCommandApplied, `{"commandId":null,"seq":3,"kind":"deliver"}`},
		{EventCommandRejected, `{"commandId":"c","seq":0,"reason":"agent_mismatch"}`},
		{EventTurnStepRetried, `{"turnId":"t","step":1,"attempt":1,"code":"agent_timeout"}`},
		{EventTurnStepRetried, `{"turnId":"t","step":0,"attempt":2,"code":"agent_timeout"}`},
		{EventTurnStepRetried, `{"turnId":"t","step":1,"attempt":2}`},
		{EventTurnStepRetried, `{"turnId":"t","step":1,"attempt":2,"code":""}`},
		{EventTurnStepRetried, `{"step":1,"attempt":2,"code":"agent_timeout"}`},
		{EventTurnStepRetried, `{"turnId":"t","step":1,"attempt":2,"code":"agent_timeout","delay":"1s"}`},
		{EventCommandRejected, `{"commandId":"","seq":3,"reason":"agent_mismatch"}`},
		{EventCommandRejected, `{"commandId":"c","seq":3,"reason":""}`},
		{EventCommandRejected, `{"commandId":"c","seq":3}`},
		{EventCommandRejected, `{"seq":3,"reason":"agent_mismatch"}`},
		{EventCommandRejected, `{"commandId":"c","seq":3,"reason":"agent_mismatch","kind":"deliver"}`},
		{EventSessionEnded, `{"reason":"bored"}`},
		{EventSessionTagged, `{}`},
		{EventSessionTagged, `{"tags":null}`},
		{EventSessionTagged, `{"tags":[]}`},
		{EventSessionTagged, `{"tags":{"env":null}}`},
		{EventSessionTagged, `{"tags":{"env":1}}`},
		{EventSessionTagged, `{"tags":{"Env":"prod"}}`},
		{EventSessionTagged, `{"tags":{"":"prod"}}`},
		{EventSessionTagged, `{"tags":{"env":"` + strings.Repeat("v", MaxTagValueBytes+1) + `"}}`},
		{EventSessionTagged, `{"tags":{"env":"` + strings.Repeat("é", MaxTagValueBytes/2+1) + `"}}`},
		{EventSessionTagged, `{"tags":{` + jsonTags(MaxTags+1) + `}}`},
		{EventSessionTagged, `{"tags":{},"set":{}}`},
		{EventSessionTagged, `{"Tags":{}}`},
		{EventHandoffSkipped, `{"reason":"busy","commandId":"c","seq":1,"deploymentId":"d1","targetDeploymentId":"latest"}`},
		{EventMessageOutput, `{"text":"a","ref":{"digest":"` + ref.Digest + `","size":11}}`},
		{EventMessageOutput, `{"turnId":"t1"}`},
		{EventMessageOutput, `{"ref":{"digest":"sha256:xyz","size":1}}`},
		{EventTurnStep, `{"turnId":"t1","step":-1}`},
	}
}()

func TestMalformedEventData(t *testing.T) {
	tests := malformedEventData
	reg := DefaultEvents()
	for _, tt := range tests {
		raw := rawEvent(tt.kind, tt.data)
		_, err := DecodeEvent(reg, raw)
		var ee *EventError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &ee) || ee.Kind != tt.kind || ee.Seq != 7 {
			t.Errorf("%s %s: err = %v, want *EventError ErrInvalid", tt.kind, tt.data, err)
		}
		if e, err := DecodeEvent(nil, raw); err != nil || string(e.Data) != tt.data {
			t.Errorf("%s %s: registry-less reader: %v, data %s", tt.kind, tt.data, err, e.Data)
		}
	}
}

// envelopeRejectCases are events DecodeEvent rejects (also part of the
// corpus of TestEventSchemaAgreement).
var envelopeRejectCases = func() []struct {
	name string
	in   string
	want error
} {
	ok := string(rawEvent("turn.completed", `{"turnId":"t1"}`))
	return []struct {
		name string
		in   string
		want error
	}{
		{"seq zero", strings.Replace(ok, `"seq":7`, `"seq":0`, 1), ErrInvalid},
		{"seq negative", strings.Replace(ok, `"seq":7`, `"seq":-7`, 1), ErrInvalid},
		{"latest", strings.Replace(ok, `"dep-1"`, `"LATEST"`, 1), ErrInvalid},
		{"bad session", strings.Replace(ok, `"sess-1"`, `"a b"`, 1), ErrInvalid},
		{"zero time", strings.Replace(ok, `2026-02-03T04:05:06Z`, `0001-01-01T00:00:00Z`, 1), ErrInvalid},
		{"bad kind", strings.Replace(ok, `"turn.completed"`, `"Turn Completed"`, 1), ErrInvalid},
		{"v zero", strings.Replace(ok, `"v":1`, `"v":0`, 1), ErrInvalid},
		{"data array", strings.Replace(ok, `{"turnId":"t1"}`, `[1]`, 1), ErrInvalid},
		{"data missing", strings.Replace(ok, `,"data":{"turnId":"t1"}`, ``, 1), ErrInvalid},
		{"unknown field", strings.Replace(ok, `"v":1`, `"v":1,"x":1`, 1), ErrInvalid},
		{"data too large", strings.Replace(ok, `{"turnId":"t1"}`, `{"t":"`+strings.Repeat("x", MaxEventDataBytes)+`"}`, 1), ErrTooLarge},
		{"event too large", strings.Replace(ok, `{"turnId":"t1"}`, `{"t":"`+strings.Repeat("x", MaxEventBytes)+`"}`, 1), ErrTooLarge},
		{"not json", `{`, ErrInvalid},
	}
}()

func TestEnvelopeRejects(t *testing.T) {
	tests := envelopeRejectCases
	for _, tt := range tests {
		for _, reg := range []*EventRegistry{nil, DefaultEvents()} {
			_, err := DecodeEvent(reg, []byte(tt.in))
			var ee *EventError
			if !errors.Is(err, tt.want) || !errors.As(err, &ee) {
				t.Errorf("%s (registry %v): err = %v, want %v", tt.name, reg != nil, err, tt.want)
			}
		}
	}
}

// With a registry an unknown kind is reported, never dropped: the event
// comes back with the error. Without one it passes through unchanged.
func TestUnknownEventKind(t *testing.T) {
	raw := rawEvent("acme.note", `{"b":[1, 2],"a":"<&>"}`)
	e, err := DecodeEvent(DefaultEvents(), raw)
	if !errors.Is(err, ErrUnknownKind) || e.Kind != "acme.note" || e.Seq != 7 {
		t.Fatalf("with registry: %+v, %v", e, err)
	}
	e, err = DecodeEvent(nil, raw)
	if err != nil || string(e.Data) != `{"b":[1,2],"a":"<&>"}` {
		t.Fatalf("without registry: %s, %v", e.Data, err)
	}
	if _, err := EncodeEvent(DefaultEvents(), e); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("a producer cannot append an unregistered kind: %v", err)
	}
	if _, err := EncodeEvent(nil, e); err != nil {
		t.Fatalf("envelope-only encode: %v", err)
	}
}

type acmeNote struct {
	Note  string `json:"note"`
	Level int    `json:"level,omitempty"`
}

func TestRegisterAgentEvent(t *testing.T) {
	reg := DefaultEvents()
	validate := func(n acmeNote) error {
		if n.Level > 3 {
			return errors.New("level above 3")
		}
		return nil
	}
	if err := RegisterEvent(reg, "acme.note", validate); err != nil {
		t.Fatal(err)
	}
	if DefaultEvents().Has("acme.note") {
		t.Fatal("registration leaked into the built-ins")
	}
	if _, err := EncodeEvent(reg, envelope("acme.note", acmeNote{Note: "hi", Level: 2})); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"note":"hi","level":4}`, `{"level":1}`, `{"note":1}`, `{"note":"a","x":1}`} {
		if _, err := DecodeEvent(reg, rawEvent("acme.note", bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
	got, err := DecodeData[acmeNote](envelope("acme.note", acmeNote{Note: "x"}))
	if err != nil || got.Note != "x" {
		t.Fatalf("DecodeData: %+v %v", got, err)
	}
	raw := rawEvent("acme.note", `{"note":"x"}`)
	if e, err := DecodeEvent(reg, []byte(strings.Replace(string(raw), `"v":1`, `"v":2`, 1))); !errors.Is(err, ErrUnknownVersion) || e.V != 2 {
		t.Errorf("newer data version: %+v, err = %v (want the event and ErrUnknownVersion)", e, err)
	}
	var zero EventRegistry
	if err := RegisterEvent[acmeNote](&zero, "acme.note", nil); err != nil || !zero.Has("acme.note") {
		t.Errorf("zero registry: %v", err)
	}
}

func TestRegisterEventRejects(t *testing.T) {
	reg := DefaultEvents()
	type withChan struct{ C chan int }
	errs := []error{
		RegisterEvent[acmeNote](reg, EventTurnStarted, nil),
		RegisterEvent[acmeNote](reg, "Bad Kind", nil),
		RegisterEvent[acmeNote](reg, "", nil),
		RegisterEvent[string](reg, "acme.string", nil),
		RegisterEvent[withChan](reg, "acme.chan", nil),
	}
	for i, err := range errs {
		if !errors.Is(err, ErrRegistry) {
			t.Errorf("case %d: err = %v, want ErrRegistry", i, err)
		}
	}
}

func TestNewEventNilData(t *testing.T) {
	e := envelope(EventSessionResumed, nil)
	b, err := EncodeEvent(DefaultEvents(), e)
	if err != nil || !strings.HasSuffix(string(b), `"data":{}}`) {
		t.Fatalf("%s %v", b, err)
	}
}

// The codecs are safe for concurrent use (run with -race).
func TestConcurrentUse(t *testing.T) {
	reg := DefaultEvents()
	cmd := readFile(t, "testdata/v1/deliver.json")
	ev, err := EncodeEvent(reg, envelope(EventTurnStarted, TurnStarted{TurnID: "t1"}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			var err error
			for range 50 {
				if i%2 == 0 {
					_, err = Decode(cmd)
				} else {
					_, err = DecodeEvent(reg, ev)
				}
				if err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
