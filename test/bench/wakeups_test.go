package bench

import (
	"math"
	"testing"
)

func TestKeepaliveBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    wakeupState
		want float64
	}{
		{name: "no connection", w: wakeupState{Settle: 2, Seconds: 100}, want: 0},
		{name: "window shorter than the interval", w: wakeupState{Connections: 100, Settle: 2, Seconds: 10}, want: 0},
		{name: "one ping each", w: wakeupState{Connections: 10, Settle: 2, Seconds: 60}, want: 10 * switchesPerWake / 60.0},
		{name: "two pings each", w: wakeupState{Connections: 10, Settle: 0, Seconds: 120}, want: 2 * 10 * switchesPerWake / 120.0},
		{name: "no window", w: wakeupState{Connections: 10}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keepaliveBudget(tc.w); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("keepaliveBudget = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWakeupsBeyondKeepalives(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wakeups []wakeupState
		want    float64
		state   string
	}{
		{name: "not measured", want: math.NaN()},
		{name: "no floor", wakeups: []wakeupState{{Impl: ImplOurs, State: wakeNone, Seconds: 10, WakeupsPerSec: 3}}, want: math.NaN()},
		{name: "worst state less its floor", wakeups: []wakeupState{
			{Impl: ImplFloorRPC, State: wakeNone, Seconds: 10, WakeupsPerSec: 0.5},
			{Impl: ImplFloorRPC, State: wakeConns, Seconds: 10, Connections: 10},
			{Impl: ImplOurs, State: wakeNone, Seconds: 10, WakeupsPerSec: 4},
			{Impl: ImplOurs, State: wakeConns, Seconds: 10, Connections: 10, WakeupsPerSec: 3},
		}, want: 3.5, state: wakeNone},
		{name: "keepalives due are allowed", wakeups: []wakeupState{
			{Impl: ImplFloorRPC, State: wakeConns, Seconds: 60, Connections: 10},
			{Impl: ImplOurs, State: wakeConns, Seconds: 60, Connections: 10, WakeupsPerSec: 10 * switchesPerWake / 60.0},
		}, want: 0, state: wakeConns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, state := wakeupsBeyondKeepalives(&Results{Wakeups: tc.wakeups})
			if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9 || state != tc.state {
				t.Errorf("wakeupsBeyondKeepalives = %v in %q, want %v in %q", got, state, tc.want, tc.state)
			}
		})
	}
}
