package main

import (
	"errors"
	"os"
	goruntime "runtime"
	"runtime/pprof"
)

// profiles are the profile paths of -cpuprofile, -mutexprofile,
// -blockprofile and -memprofile ("": none); each suite's go to
// <path>.<suite>.
type profiles struct{ cpu, mutex, block, mem string }

// start starts profiling suite and returns what stops it and writes its
// profiles. Contention is recorded from the first suite after the js
// baselines on.
func (p profiles) start(suite string) (func() error, error) {
	var cpu *os.File
	if p.cpu != "" {
		f, err := os.Create(p.cpu + "." + suite)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpu = f
	}
	contention := suite != "js"
	if contention && p.mutex != "" {
		goruntime.SetMutexProfileFraction(5)
	}
	if contention && p.block != "" {
		goruntime.SetBlockProfileRate(10_000) // one blocking event per 10 µs blocked
	}
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if contention {
			errs = append(errs, writeProfile("mutex", p.mutex, suite), writeProfile("block", p.block, suite))
		}
		errs = append(errs, writeProfile("allocs", p.mem, suite))
		return errors.Join(errs...)
	}, nil
}

// writeProfile writes the named runtime profile to path.suite.
func writeProfile(name, path, suite string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path + "." + suite)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// figureCPU is -figureprofile's path ("": none): a CPU profile of each
// delivery_to_step_start figure alone, to <path>.<figure> (the suite's
// other figures and set-up left out). It excludes -cpuprofile: Go runs
// one CPU profile at a time.
var figureCPU string

// profileFigure starts the CPU profile of figure when -figureprofile asks
// for it and returns what stops it and writes it.
func profileFigure(figure string) (func() error, error) {
	if figureCPU == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(figureCPU + "." + figure)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
