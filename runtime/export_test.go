package runtime

// BreakAdmitOrder makes m admit the newest FIFO command instead of the
// oldest: a deliberately broken rule the property tests must catch.
func BreakAdmitOrder(m *Machine) { m.brokenAdmitOutOfOrder = true }

// BreakBudget makes m admit every queued command at a boundary, as if it
// had no budget: a deliberately broken rule the property tests must catch.
func BreakBudget(m *Machine) { m.brokenNoBudget = true }
