package ui_test

import (
	"testing"
	"time"
)

// The sessions list shows every session with its state and its waits;
// filtering by tag and by waiting=input shows only the matching rows;
// searching an alias opens its session.
func TestUISessionsList(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	red := w.create(newSession{Alias: "ui-red", Tags: map[string]string{"team": "red"}, Text: "hello"})
	blue := w.create(newSession{Alias: "ui-blue", Tags: map[string]string{"team": "blue"}, Text: "/ask why?"})
	gold := w.create(newSession{Alias: "ui-gold", Tags: map[string]string{"team": "red", "tier": "gold"}, Text: "hi"})
	w.waitingInput(blue)
	// The page reads the session index: wait until it has caught up.
	w.listed("", red, blue, gold)
	w.listed("?tag=team:red", red, gold)
	w.listed("?waiting=input", blue)

	p := openUI(t, w.base(), adminToken)
	p.route("#/")
	p.rows(red, blue, gold)
	p.visible(row(red) + ` td.id a[href="#/session/` + red + `"]`)
	p.hasText(row(red)+" td.state span.state.state-active", "active")
	p.textIs(row(red)+" td.waiting", "—")
	p.hasText(row(blue)+" td.waiting", "input")
	p.textIs(row(blue)+" td.agent", "default")
	p.textIs(row(blue)+" td.deployment", "v1")
	p.shot("sessions-list")

	p.filter("tag", "team:red")
	p.rows(red, gold)
	p.shot("sessions-tag")
	p.filter("tag", "", "waiting", "input")
	p.rows(blue)
	p.shot("sessions-waiting")
	p.filter("waiting", "", "tag", "team:green")
	p.rows()

	p.set("form#filters [name=q]", "ui-gold")
	p.click("button#search")
	p.textIs("h1#session-id", gold)
	p.shot("sessions-search")
}

// A wrong admin token shows the API's error code, never a blank page; the
// right one hides it again with the next load.
func TestUIUnauthorized(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	p := openUI(t, w.base(), "not-the-admin-token")
	p.route("#/")
	p.visible("#error")
	p.textIs("#error .code", "unauthorized")
	p.visible("#error .message")
	p.shot("error-unauthorized")

	p.set("form#auth input#admin-token", adminToken)
	p.click("form#auth button[type=submit]")
	p.rows()
	p.until("#error hidden", `() => {
		const e = document.querySelector("#error");
		return e !== null && (e.hidden || e.getClientRects().length === 0);
	}`)
	p.shot("error-cleared")
}

// The deployments page lists a session that waits for input under its
// deployment as not idle, with why "input"; an idle session is not there.
func TestUINotIdleReason(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	asking := w.create(newSession{Text: "/ask which colour?"})
	idle := w.create(newSession{Text: "hello"})
	w.waitingInput(asking)
	w.Turns("v1", idle, 1)
	w.notIdle("v1", asking, "input")

	p := openUI(t, w.base(), adminToken)
	p.route("#/deployments")
	p.visible(`section#agents[data-loaded="true"]`)
	dep := `section#agents > div.agent[data-agent="default"] div.deployment[data-deployment="v1"]`
	p.visible(dep)
	li := dep + ` ul.not-idle > li.not-idle-session[data-id="` + asking + `"]`
	p.visible(li)
	p.textIs(li+" span.why", "input")
	p.visible(li + ` a[href="#/session/` + asking + `"]`)
	p.gone(`li.not-idle-session[data-id="` + idle + `"]`)
	p.visible(dep + " .owners")
	p.shot("deployments-not-idle")
}
