package runtime

import "sync"

// brokenMachines are the machines these tests broke on purpose, by rule.
var brokenMachines = struct{ admitNewest, noBudget sync.Map }{}

func init() {
	broken.admitNewest = func(m *Machine) bool { _, ok := brokenMachines.admitNewest.Load(m); return ok }
	broken.noBudget = func(m *Machine) bool { _, ok := brokenMachines.noBudget.Load(m); return ok }
}

// BreakAdmitOrder makes m admit the newest FIFO command instead of the
// oldest: a deliberately broken rule the property tests must catch.
func BreakAdmitOrder(m *Machine) { brokenMachines.admitNewest.Store(m, true) }

// BreakBudget makes m admit every queued command at a boundary, as if it
// had no budget: a deliberately broken rule the property tests must catch.
func BreakBudget(m *Machine) { brokenMachines.noBudget.Store(m, true) }
