// Package oldbuild builds bin/owner and bin/ingress of an earlier commit of
// this repository, for the mixed-build upgrade test (test/upgrade, make
// test-upgrade): the binaries users actually run beside a new build.
//
// Build takes the commit's tree with git archive — never a worktree, never
// a write to the repository's .git — into a per-user cache directory,
// $XDG_CACHE_HOME/baton-builds/<hash> (os.UserCacheDir), builds both
// binaries there once under a lock file and reuses them afterwards, so two
// test runs at once build a commit once. The commit must be in the clone
// and an ancestor of HEAD: nothing is fetched, and a clone without it
// fails loudly, naming it.
//
// Pin is the commit the upgrade test runs as the previous build; bumping it
// is a deliberate change (docs/upgrade-testing.md).
package oldbuild
