package runtime

// BreakAdmitOrder makes m admit the newest FIFO command instead of the
// oldest: a deliberately broken rule the property tests must catch.
func BreakAdmitOrder(m *Machine) { m.brokenAdmitOutOfOrder = true }
