// Package execlog is the execution log of the test aids: which step of
// which session ran in which owner process (Exec), in memory (MemLog) or
// appended to a file that survives a SIGKILL (FileLog, bin/owner
// --exec-log, read back by ReadFileLog), so tests that kill processes
// prove from outside that no committed step ran twice. The demo agent
// writes it (runtime/demo's ExecLog is any value with Record); no
// production path reads it.
package execlog
