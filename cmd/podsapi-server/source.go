package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/podsapi/podsapi/source"
	"github.com/podsapi/podsapi/source/apiserver"
	"github.com/podsapi/podsapi/source/kubeletgrpc"
	"github.com/podsapi/podsapi/source/kubelethttp"
	"github.com/podsapi/podsapi/source/manifest"
)

// sources are the pod sources --source chooses from, the first by default:
// one line each.
var sources = []source.Registration{
	manifest.Registration,
	kubelethttp.Registration,
	kubeletgrpc.Registration,
	apiserver.Registration,
}

// sourceFlags are the command-line flags that choose and configure the pod
// source: --source, and the flags of every source, each owned by its source.
type sourceFlags struct {
	kind   *string
	owners map[string]string // source of each flag
	makers map[string]func(source.Env) (source.Source, error)
}

// addSourceFlags defines --source and the flags of every source on fs.
func addSourceFlags(fs *pflag.FlagSet) *sourceFlags {
	f := &sourceFlags{owners: map[string]string{}, makers: map[string]func(source.Env) (source.Source, error){}}
	var helps []string
	for _, r := range sources {
		sub := flag.NewFlagSet(r.Name, flag.ContinueOnError)
		f.makers[r.Name] = r.Flags(sub)
		sub.VisitAll(func(fl *flag.Flag) {
			fs.AddGoFlag(fl)
			f.owners[fl.Name] = r.Name
		})
		helps = append(helps, fmt.Sprintf("%s (%s)", r.Name, r.Help))
	}
	f.kind = fs.String("source", sources[0].Name, "pod source: "+orList(helps))
	return f
}

// newSource returns the pod source the parsed flags of fs choose, or a
// usage error.
func (f *sourceFlags) newSource(fs *pflag.FlagSet, env source.Env) (source.Source, error) {
	newSource, ok := f.makers[*f.kind]
	if !ok {
		names := make([]string, len(sources))
		for i, r := range sources {
			names[i] = r.Name
		}
		return nil, fmt.Errorf("--source %q: want %s", *f.kind, orList(names))
	}
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if owner, ok := f.owners[fl.Name]; ok && owner != *f.kind && err == nil {
			err = fmt.Errorf("--%s is a flag of --source=%s, not of --source=%s", fl.Name, owner, *f.kind)
		}
	})
	if err != nil {
		return nil, err
	}
	return newSource(env)
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
