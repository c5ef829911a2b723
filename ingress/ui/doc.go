// Package ui is the session inspector of the ingress (docs/ui.md): a
// single-page app — index.html, ES modules and a style sheet under
// static/, no build step, no framework, no external asset — embedded in
// the binary and served by Handler under /ui/ when the ingress runs with
// --ui (ingress.Config.UI).
//
// The app speaks only the public HTTP API (docs/api.md) from the browser,
// with the bearer tokens its user enters and stream tokens for
// EventSource; this package serves files and nothing else. The DOM the
// app builds is a contract its chromedp tests (test/ui) are written
// against: docs/ui.md summarizes it.
//
// Every answer carries Cache-Control: no-cache (with an ETag, so a reload
// revalidates), a Content-Security-Policy that allows nothing but the
// ingress's own origin (CSP: no inline script or style in the files) and
// X-Content-Type-Options: nosniff.
//
// It imports no package of the project.
package ui
