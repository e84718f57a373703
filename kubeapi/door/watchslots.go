package door

import (
	"errors"
	"net/http"

	"github.com/podsapi/podsapi/internal/admit"
)

// withWatchSlots holds a slot of the door's watches (WithMaxWatches) for
// each watch, local or passed through, for as long as it is served, in the
// name of its caller (named by withAuthentication or withPassedCaller): one
// account's watches cannot fill the door and lock others out, nor hold
// connections and memory beyond its share. A watch beyond the total or its
// caller's share is refused 429 with Retry-After.
func (d *Door) withWatchSlots(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context())
		if !info.watch {
			next.ServeHTTP(w, r)
			return
		}
		release, err := d.watches.Acquire(info.caller)
		if err != nil {
			var full *admit.SlotsFull
			errors.As(err, &full)
			writeStatus(w, errTooManyWatches(full.Limit, full.Key != ""))
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
