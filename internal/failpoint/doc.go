// Package failpoint keeps fault injection out of the owner's production
// types (the idea of etcd's gofail, without code generation): production
// code names a point (Name) and asks a *Registry whether an action is
// armed there (Eval, Hit, Run, Value); tests arm points with On and Set,
// and bin/owner --fault arms the crash points (owner/faults.go). A nil
// registry — every production process without --fault — arms nothing and
// costs one nil check per point.
//
// The points are this package's constants, each documented with the
// arguments it passes and what an action's error does there. Only tests
// and the --fault option create a registry.
package failpoint
