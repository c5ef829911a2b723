// Package ui holds the browser tests of the ingress's inspector (/ui/,
// ingress.Config.UI, the DOM contract of ingress/ui): a real headless
// Chromium, driven by chromedp, against a real embedded nats-server with
// the topology, in-process owners of the demo agent and a real ingress.
// Each test opens the inspector, signs in with an admin token, drives it
// as an operator would — filters the sessions list, sends a message that
// streams, answers an input request, pauses and resumes, promotes a
// deployment — and checks the DOM, saving a full-page screenshot of every
// page it visits to $BATON_UI_SHOTS (default build/ui-shots).
//
// The browser is $BATON_CHROMIUM, or chromium, chromium-headless-shell or
// chromium-browser on PATH (Debian: apt-get install chromium); without one
// the tests fail, unless -short. Each browser runs in a process group of
// its own that the test kills when it ends, and dies with the test
// process (Pdeathsig). It has no non-test code.
package ui
