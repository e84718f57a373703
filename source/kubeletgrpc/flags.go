package kubeletgrpc

import (
	"flag"
	"fmt"

	"github.com/podsapi/podsapi/internal/h2c"
	"github.com/podsapi/podsapi/source"
)

// Registration offers the source on podsapi-server's command line, as
// --source=kubelet-grpc with --source-socket and --source-resync-interval.
var Registration = source.Registration{
	Name: "kubelet-grpc",
	Help: "the kubelet's own Pods API socket",
	Flags: func(fs *flag.FlagSet) func(source.Env) (source.Source, error) {
		sock := fs.String("source-socket", DefaultSocket, "kubelet-grpc: the kubelet's Pods API socket; --socket must be another path")
		resync := fs.Duration("source-resync-interval", DefaultResyncInterval,
			"kubelet-grpc: time between two ListPods of the kubelet that find the edits its watch does not report (one token of its rate limit each); negative for none")
		return func(env source.Env) (source.Source, error) {
			if samePath(h2c.SocketPath(*sock), env.Socket) {
				return nil, fmt.Errorf("--socket and --source-socket are both %s (through symbolic links or not): serve on another path", env.Socket)
			}
			return New(WithSocket(*sock), WithLogger(env.Logger), WithRegisterer(env.Registerer), WithResyncInterval(*resync), WithMaxPodBytes(env.MaxPodBytes)), nil
		}
	},
}
