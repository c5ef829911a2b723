// Package pool is the owner process: one Owner serves one owner process of
// one deployment, and runs each session it loads (package runtime/session)
// in its own goroutine, over the session's ports on JetStream (package
// runtime/jsport: inbox consumers, the state object store, message
// schedules for timers; kv for records, runtime/eventlog for event
// appends), which it wires.
//
// It answers start requests on baton.deploy.<deploymentID>.start (queue
// group of the deployment's pool; a new session or a handoff successor, as
// protocol.DecodeStart tells them apart), wake requests, and finish
// requests (baton.deploy.<deploymentID>.finish, and baton.finish for any
// owner: Owner.Finish carries out an operator's end or retry of a
// quarantined session, finish.go), and holds what belongs to the process,
// each part a type of its own (docs/driver.md, "The owner process's
// parts"): the lease and its peers, the loaded-session registry (the cap,
// hibernation settling), the quarantine gate, the sweepers,
// retired-deployment adoption, tasks, drain, metrics and the failpoints.
//
//	claim: add the session to this process's index (before claiming),
//	       read the checkpoint (session.ReadCheckpoint: an owner never
//	       claims what it cannot run), decide the boot attempt
//	       (quarantine; a run this process saw stop is no death, lived.go),
//	       claim the record by CAS (epoch+1, this run, this deployment),
//	       then session.New and Run
//
// Durability (docs/runtime.md §6): the process holds a lease
// (baton_owners/lease.<processID>, TTL, renewed every TTL/4) before it
// resumes its index, and fences itself — every session stops, nothing is
// served — when it has not renewed for TTL − TTL/4. Peers watch the leases:
// when a process of their deployment dies, one of them takes its key over
// by a conditional write and wakes each of its sessions through the
// deployment's wake queue group (Owner.Wake), where they are claimed afresh.
// An orphan sweeper adopts what the watch missed. A lost consumer is
// recreated at the lowest unapplied sequence only while the record still
// names the run.
package pool
