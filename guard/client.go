package guard

import (
	"context"
	"errors"
	"strconv"

	"github.com/podsapi/podsapi/podcgroup"
)

// Client returns the name of the client p is, by which the per-client
// shares (watches, calls waiting for their request, the per-client rate
// limit) are counted: the pod or the systemd unit of its process, read
// once from its cgroup through p.Cgroup ("pod/<UID>", "unit/<name>",
// "cgroup/<path>", see podcgroup.Client), or "uid/<UID>" when the process is
// in none of these, its cgroup cannot be read, or p.Cgroup is nil; peers
// without credentials are all "unknown". Agents on a node usually all run
// as root: their cgroups tell them apart where their UIDs cannot.
//
// The name is read at the peer's first call and kept for its connection;
// a read that could not be made in time (podcgroup.ErrBusy) names this call
// by UID and is tried again at the next one.
func (p *Peer) Client(ctx context.Context) string {
	if p == nil || !p.Known {
		return "unknown"
	}
	p.clientMu.Lock()
	defer p.clientMu.Unlock()
	if p.client != "" {
		return p.client
	}
	byUID := "uid/" + strconv.FormatUint(uint64(p.UID), 10)
	if p.Cgroup == nil {
		p.client = byUID
		return p.client
	}
	file, err := p.Cgroup(ctx, p.PID)
	switch {
	case errors.Is(err, podcgroup.ErrBusy) || ctx.Err() != nil:
		return byUID
	case err != nil:
		p.client = byUID
	default:
		if c := podcgroup.Client(file); c != "" {
			p.client = c
		} else {
			p.client = byUID
		}
	}
	return p.client
}
