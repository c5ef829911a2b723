package ui_test

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/baton-rt/baton/wire"
)

// The inspector's views, in the terms of its DOM contract.

// row is the selector of session id's row in the sessions list.
func row(id string) string { return fmt.Sprintf(`table#sessions > tbody > tr.session[data-id=%q]`, id) }

// event is the selector of the timeline's events of kind.
func event(kind string) string { return fmt.Sprintf(`section#timeline div.event[data-kind=%q]`, kind) }

// field is the selector of the status field name.
func field(name string) string { return fmt.Sprintf(`section#status dd[data-field=%q]`, name) }

// rows waits until a completed load of the sessions list shows exactly
// the sessions ids, in any order (none: #sessions-empty shown).
func (p *page) rows(ids ...string) {
	p.t.Helper()
	want := slices.Sorted(slices.Values(ids))
	if want == nil {
		want = []string{}
	}
	p.until(fmt.Sprintf("the sessions list to show exactly %v", want), `(want) => {
		const table = document.querySelector("table#sessions");
		if (!table || table.dataset.loaded !== "true") return false;
		const got = [...table.querySelectorAll(":scope > tbody > tr.session")].map(r => r.dataset.id).sort();
		const empty = document.querySelector("#sessions-empty");
		const emptyShown = empty !== null && !empty.hidden && empty.getClientRects().length > 0;
		return JSON.stringify(got) === JSON.stringify(want) && emptyShown === (want.length === 0);
	}`, want)
}

// filter submits form#filters with the fields given (name, value, …;
// the others as they are) by button#apply.
func (p *page) filter(kv ...string) {
	p.t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		p.set(fmt.Sprintf(`form#filters [name=%q]`, kv[i]), kv[i+1])
	}
	p.click("form#filters button#apply")
}

// session opens session id's page and waits until it shows the ID, its
// status and an open event stream.
func (p *page) session(id string) {
	p.t.Helper()
	p.route("#/session/" + id)
	p.textIs("h1#session-id", id)
	p.until("the status and an open event stream", `() => {
		const st = document.querySelector('section#status dd[data-field="state"]');
		const tl = document.querySelector("section#timeline");
		return st !== null && st.textContent.trim() !== "" && tl !== null && tl.dataset.stream === "open";
	}`)
}

// timeline waits until the timeline shows every event of evs by seq and
// kind, and its data-last-seq is the last one's.
func (p *page) timeline(evs []wire.Event) {
	p.t.Helper()
	type ev struct {
		Seq  uint64 `json:"seq"`
		Kind string `json:"kind"`
	}
	want := make([]ev, len(evs))
	for i, e := range evs {
		want[i] = ev{e.Seq, e.Kind}
	}
	last := strconv.FormatUint(evs[len(evs)-1].Seq, 10)
	p.until(fmt.Sprintf("the timeline to show events 1 to %s", last), `(want, last) => {
		const tl = document.querySelector("section#timeline");
		if (!tl || tl.dataset.lastSeq !== last) return false;
		return want.every(w => tl.querySelector('div.event[data-seq="' + w.seq + '"][data-kind="' + w.kind + '"]') !== null);
	}`, want, last)
}

// composer sends text through form#composer with busy mode mode ("":
// the session's default).
func (p *page) composer(text, mode string) {
	p.t.Helper()
	p.set("form#composer textarea[name=text]", text)
	p.set("form#composer select[name=mode]", mode)
	p.click("form#composer button[type=submit]")
}
