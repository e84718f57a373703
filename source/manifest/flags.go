package manifest

import (
	"errors"
	"flag"

	"github.com/podsapi/podsapi/source"
)

// Registration offers the source on podsapi-server's command line, as
// --source=manifest with --manifest-dir and --max-manifest-bytes.
var Registration = source.Registration{
	Name: "manifest",
	Help: "the static pod manifests of --manifest-dir",
	Flags: func(fs *flag.FlagSet) func(source.Env) (source.Source, error) {
		dir := fs.String("manifest-dir", "", "directory of static pod manifests to serve (required with --source=manifest)")
		maxBytes := fs.Int64("max-manifest-bytes", DefaultMaxFileBytes,
			"manifest: size cap of a manifest file, and of each YAML document with its aliases expanded; negative for no cap")
		return func(env source.Env) (source.Source, error) {
			if *dir == "" {
				return nil, errors.New("--manifest-dir is required")
			}
			return New(*dir, env.NodeName, WithLogger(env.Logger), WithRegisterer(env.Registerer), WithMaxFileBytes(*maxBytes)), nil
		}
	},
}
