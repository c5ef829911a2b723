package main

// allowList is every exception to the size limits, one entry each, with its
// reason. Path is slash-separated and relative to the module root; Func
// names a function as the check prints it (Name, Recv.Name for a method,
// the variable's name for a function literal), or is empty for the file's
// own length. Remove an entry when its offender is split: the check fails on
// an entry that matches nothing.
var allowList = []allow{}
