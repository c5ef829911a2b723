// Package stages times the stages of a delivery on its way to the agent's
// step, for the breakdown in docs/performance.md. It is compiled in only
// with the build tag batonstages (go run -tags batonstages ./cmd/bench):
// without it every function is an empty one the compiler inlines away, so
// the marks on the delivery path cost nothing in a normal build.
//
// A cycle is keyed by session ID: Start begins one (the bench, as it
// publishes a delivery), Mark records the first time each named stage is
// reached in it, and Report prints, per stage, the median time since the
// previous stage over every cycle that reached all of them.
//
// It imports only the standard library.
package stages
