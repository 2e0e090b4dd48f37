package main

// Resource shapes on purpose, for the labelled leak corpus (tests/fixtures/leaks,
// bench/record_leak_corpus.py): each -shape makes the server's memory, goroutines or
// file descriptors follow one shape that a healthy server (or a leaking one) has, by
// really allocating, parking or opening, beside its normal work.
//
//	startup     -shape-mib over -shape-for from the start, then held flat
//	settle      toward -shape-mib, decelerating: mib x (1 - e^(-t / -shape-for)), a
//	            resource that levels off slowly (concave, no corner)
//	leak        from -shape-onset on, -shape-kib-per-s held for good
//	goroutines  from -shape-onset on, -shape-per-s goroutines parked for good
//	fds         from -shape-onset on, -shape-per-s descriptors of /dev/null kept open
//	sawtooth    -shape-mib held for good, plus -shape-kib-per-s of garbage: the GC's
//	            sawtooth above a flat floor
//	batch       every -shape-every, -shape-mib held for -shape-for, then freed and
//	            given back to the OS (a periodic job)

import (
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"time"
)

type shapeOptions struct {
	name     string
	mib      int
	kibPerS  float64
	perS     float64
	onset    time.Duration
	hold     time.Duration
	every    time.Duration
	stepTime time.Duration
}

var shapeNames = map[string]bool{"": true, "startup": true, "leak": true, "goroutines": true,
	"fds": true, "sawtooth": true, "batch": true, "settle": true}

func (o *shapeOptions) validate() error {
	if !shapeNames[o.name] {
		return fmt.Errorf("-shape %q is not one of startup, settle, leak, goroutines, fds, sawtooth, batch", o.name)
	}
	if o.mib < 0 || o.kibPerS < 0 || o.perS < 0 || o.onset < 0 || o.hold < 0 || o.every < 0 {
		return fmt.Errorf("-shape-* values must not be negative")
	}
	if o.name == "batch" && (o.every <= 0 || o.hold >= o.every) {
		return fmt.Errorf("-shape batch wants -shape-every > -shape-for > 0")
	}
	if (o.name == "startup" || o.name == "settle") && o.hold <= 0 {
		return fmt.Errorf("-shape %s wants -shape-for > 0 (how long the growth lasts)", o.name)
	}
	return nil
}

// shaper holds what a shape keeps alive; its step runs every stepTime from the start.
type shaper struct {
	o       shapeOptions
	start   time.Time
	held    [][]byte
	heldKiB float64 // KiB allocated so far by a rate shape
	fds     []*os.File
	parked  float64 // goroutines parked so far
	park    chan struct{}
	garbage []byte
}

func startShape(o shapeOptions) {
	if o.name == "" {
		return
	}
	s := &shaper{o: o, start: time.Now(), park: make(chan struct{})}
	if o.name == "sawtooth" {
		s.held = append(s.held, touched(o.mib<<20))
	}
	log.Printf("refdns: shape %s (mib %d, kib/s %g, per s %g, onset %v, for %v, every %v)",
		o.name, o.mib, o.kibPerS, o.perS, o.onset, o.hold, o.every)
	go func() {
		tick := time.NewTicker(o.stepTime)
		defer tick.Stop()
		for now := range tick.C {
			s.step(now.Sub(s.start))
		}
	}()
}

// touched: n bytes written to, so that they are resident, not only reserved.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = byte(i >> 12)
	}
	return b
}

func (s *shaper) step(elapsed time.Duration) {
	o := s.o
	sinceOnset := (elapsed - o.onset).Seconds()
	switch o.name {
	case "startup":
		share := elapsed.Seconds() / o.hold.Seconds()
		if share > 1 {
			share = 1
		}
		s.growTo(share * float64(o.mib<<10))
	case "settle":
		s.growTo(float64(o.mib<<10) * (1 - math.Exp(-elapsed.Seconds()/o.hold.Seconds())))
	case "leak":
		if sinceOnset > 0 {
			s.growTo(sinceOnset * o.kibPerS)
		}
	case "goroutines":
		for ; sinceOnset > 0 && s.parked < sinceOnset*o.perS; s.parked++ {
			go func(c chan struct{}) { <-c }(s.park) // never closed
		}
	case "fds":
		for sinceOnset > 0 && float64(len(s.fds)) < sinceOnset*o.perS {
			f, err := os.Open(os.DevNull)
			if err != nil {
				log.Printf("refdns: shape fds: %v", err)
				return
			}
			s.fds = append(s.fds, f)
		}
	case "sawtooth":
		// Garbage at the rate: each step's slice replaces the last, the GC collects it.
		s.garbage = touched(int(o.kibPerS * o.stepTime.Seconds() * 1024))
	case "batch":
		inBatch := elapsed%o.every < o.hold && elapsed >= o.every
		if inBatch && len(s.held) == 0 {
			s.held = append(s.held, touched(o.mib<<20))
		} else if !inBatch && len(s.held) > 0 {
			s.held = nil
			debug.FreeOSMemory() // the batch's memory goes back, as a job's would
		}
	}
	runtime.KeepAlive(s.garbage)
}

// growTo allocates (and keeps) until heldKiB reaches kib, in whole KiB.
func (s *shaper) growTo(kib float64) {
	if more := int(kib - s.heldKiB); more > 0 {
		s.held = append(s.held, touched(more<<10))
		s.heldKiB += float64(more)
	}
}
