package wire

// EventBody is the typed data of a built-in event kind: each data type in
// events_builtin.go names its kind, so a producer that builds events from
// these types cannot pair a body with the wrong kind (TestEventBodyKinds
// holds every method to the registry).
type EventBody interface {
	EventKind() string
}

// Versioned is an EventBody of a data version above 1 (the version it is
// recorded at); a body without it is version 1.
type Versioned interface {
	DataVersion() int
}

// DataVersionOf is b's data version.
func DataVersionOf(b EventBody) int {
	if v, ok := b.(Versioned); ok {
		return v.DataVersion()
	}
	return 1
}

// EventKind implementations: one per built-in data type.

func (SessionStarted) EventKind() string     { return EventSessionStarted }
func (CommandApplied) EventKind() string     { return EventCommandApplied }
func (CommandRejected) EventKind() string    { return EventCommandRejected }
func (TurnStarted) EventKind() string        { return EventTurnStarted }
func (TurnStep) EventKind() string           { return EventTurnStep }
func (TurnStepRetried) EventKind() string    { return EventTurnStepRetried }
func (MessageOutput) EventKind() string      { return EventMessageOutput }
func (InputRequested) EventKind() string     { return EventInputRequested }
func (AuthRequested) EventKind() string      { return EventAuthRequested }
func (TaskStarted) EventKind() string        { return EventTaskStarted }
func (TaskCompleted) EventKind() string      { return EventTaskCompleted }
func (TaskCompletedV2) EventKind() string    { return EventTaskCompleted }
func (TurnCompleted) EventKind() string      { return EventTurnCompleted }
func (TurnCompletedV2) EventKind() string    { return EventTurnCompleted }
func (LimitReached) EventKind() string       { return EventLimitReached }
func (TurnCancelled) EventKind() string      { return EventTurnCancelled }
func (SessionWaiting) EventKind() string     { return EventSessionWaiting }
func (SessionPaused) EventKind() string      { return EventSessionPaused }
func (SessionResumed) EventKind() string     { return EventSessionResumed }
func (SessionTagged) EventKind() string      { return EventSessionTagged }
func (HandoffStarted) EventKind() string     { return EventHandoffStarted }
func (HandoffSkipped) EventKind() string     { return EventHandoffSkipped }
func (HandoffCompleted) EventKind() string   { return EventHandoffCompleted }
func (HandoffFailed) EventKind() string      { return EventHandoffFailed }
func (WaitCancelled) EventKind() string      { return EventWaitCancelled }
func (StepInterrupted) EventKind() string    { return EventStepInterrupted }
func (WireRejected) EventKind() string       { return EventWireRejected }
func (SessionEnded) EventKind() string       { return EventSessionEnded }
func (SessionEndedV2) EventKind() string     { return EventSessionEnded }
func (ErrorData) EventKind() string          { return EventErrorKind }
func (SessionQuarantined) EventKind() string { return EventSessionQuarantined }
func (SessionRetried) EventKind() string     { return EventSessionRetried }
