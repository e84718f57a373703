package apiserver

import (
	"flag"
	"fmt"
	"os"

	"github.com/podsapi/podsapi/source"
)

// Registration offers the source on podsapi-server's command line, as
// --source=apiserver with --kubeconfig.
var Registration = source.Registration{
	Name: "apiserver",
	Help: "a watch of the node's pods on the Kubernetes API server",
	Flags: func(fs *flag.FlagSet) func(source.Env) (source.Source, error) {
		kubeconfig := fs.String("kubeconfig", "",
			"apiserver: kubeconfig file of the API server and credentials (default: the in-cluster configuration of the pod's service account)")
		return func(env source.Env) (source.Source, error) {
			if *kubeconfig != "" {
				f, err := os.Open(*kubeconfig)
				if err != nil {
					return nil, fmt.Errorf("--kubeconfig: %w", err)
				}
				_ = f.Close()
			}
			return New(env.NodeName, WithKubeconfig(*kubeconfig), WithLogger(env.Logger), WithRegisterer(env.Registerer)), nil
		}
	},
}
