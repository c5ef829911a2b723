// Package freeport picks loopback TCP ports for servers that tests stop
// and start again on the same port (a NATS node killed and restarted, an
// embedded server restarted on its store).
//
// A port picked by listening on port 0 comes from the kernel's ephemeral
// range, the range every outgoing connection's local port and every other
// listener on port 0 come from too: while its server is down, any of them
// may take it, and the restart fails with "address already in use" (two
// test runs at once made that happen). Pick chooses ports below that
// range, which neither can be given. And it reserves each port it gives
// for as long as the test process runs, by a lock file under the
// temporary directory (baton-freeport/<port>.lock): another test process
// that picks while a restarted server is down (the port free, the
// restart still to come) skips the port. Two concurrent make test runs
// once saw a restarted node find its cluster port taken so.
//
// Handed picks ports a test hands to other processes (make run's NATS
// server, owner and ingress), which it cannot hold until they bind them.
// It picks them from a range of their own, below Pick's, so that no
// server another test starts meanwhile can take one: a make run's ingress
// once found an embedded NATS server of another test on its port.
package freeport
