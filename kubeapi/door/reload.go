package door

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// reloadInterval is how often at most a reloaded file's modification time
// and size are looked at: a rotated certificate is served within it.
const reloadInterval = time.Second

// reloaded is a value parsed from files, parsed again when one of them
// changes (its modification time or size), as a Secret or ConfigMap volume
// changes when cert-manager rotates a certificate. A change that does not
// parse keeps the last value (the files may be caught half written).
type reloaded[T any] struct {
	paths []string
	parse func(data [][]byte) (T, error)

	mu      sync.Mutex
	checked time.Time
	stamps  []fileStamp
	value   T
}

// fileStamp is what tells that a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// newReloaded reads and parses paths once, and returns the error.
func newReloaded[T any](parse func([][]byte) (T, error), paths ...string) (*reloaded[T], error) {
	r := &reloaded[T]{paths: paths, parse: parse}
	stamps, value, err := r.load()
	if err != nil {
		return nil, err
	}
	r.stamps, r.value, r.checked = stamps, value, time.Now()
	return r, nil
}

// get returns the current value, reloaded if a file changed.
func (r *reloaded[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= reloadInterval {
		r.checked = now
		if r.changed() {
			if stamps, value, err := r.load(); err == nil {
				r.stamps, r.value = stamps, value
			}
		}
	}
	return r.value
}

// changed reports whether a file's stamp differs from the one loaded.
func (r *reloaded[T]) changed() bool {
	for i, p := range r.paths {
		info, err := os.Stat(p)
		if err != nil || !info.ModTime().Equal(r.stamps[i].mod) || info.Size() != r.stamps[i].size {
			return true
		}
	}
	return false
}

func (r *reloaded[T]) load() ([]fileStamp, T, error) {
	var zero T
	stamps := make([]fileStamp, len(r.paths))
	data := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, zero, err
		}
		if data[i], err = os.ReadFile(p); err != nil {
			return nil, zero, err
		}
		stamps[i] = fileStamp{info.ModTime(), info.Size()}
	}
	v, err := r.parse(data)
	if err != nil {
		return nil, zero, fmt.Errorf("%v: %w", r.paths, err)
	}
	return stamps, v, nil
}
