// Package chaos holds Baton's chaos test: the real topology on loopback — a
// three-node NATS cluster, R3 streams and buckets, two deployments of two
// bin/owner processes each (lease TTL 2 s) and one bin/ingress per
// deployment — under continuous traffic that alternates between the two
// deployments' ingresses, so sessions hand off back and forth, while a
// fault strikes every few seconds: an owner SIGKILLed or SIGTERMed (and
// started again), an owner SIGSTOPped for 4 s, a NATS node killed and
// restarted 5 s later (one node at a time). From outside — the events
// stream, the session records, the demo agent's execution logs — it checks
// that every accepted delivery is applied exactly once, in acceptance
// order, and that no step runs twice but where a crash or a fence cut its
// first run short. It prints how long deliveries took to be applied. It has
// no non-test code.
package chaos
