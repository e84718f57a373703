// Command imagebuild builds a multi-platform OCI image archive from
// prebuilt static binaries, offline and without a container engine: each
// platform's image is an empty base (like FROM scratch) plus one layer of
// files. The same inputs give the same archive, byte for byte.
//
// It is run by `make image`:
//
//	imagebuild -ref ghcr.io/podsapi/podsapi:0.1.0 -entrypoint /podsapi-server \
//	    -label org.opencontainers.image.version=0.1.0 ... \
//	    -platform linux/amd64=build/image/linux_amd64 -platform linux/arm64=build/image/linux_arm64 \
//	    -layout build/image/oci -archive build/podsapi-image.tar
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var platforms, labels, entrypoint listFlag
	ref := fs.String("ref", "", "reference the archive names the image by, e.g. ghcr.io/podsapi/podsapi:0.1.0 (required)")
	layoutDir := fs.String("layout", "", "directory to write the OCI image layout to, replacing it (required)")
	archive := fs.String("archive", "", "file to write the layout to as a tar archive (an oci-archive); empty writes none")
	epoch := fs.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time of the image, in seconds since the Unix epoch (default $SOURCE_DATE_EPOCH, else 0)")
	fs.Var(&platforms, "platform", "os/arch[/variant]=DIR: an image for that platform whose layer holds the regular files of DIR at / (repeatable, in index order)")
	fs.Var(&labels, "label", "KEY=VALUE label of each image config, also an annotation of the index (repeatable)")
	fs.Var(&entrypoint, "entrypoint", "an element of the entry point (repeatable, in order)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	case *ref == "" || *layoutDir == "":
		return errors.New("-ref and -layout are required")
	case len(platforms) == 0:
		return errors.New("at least one -platform is required")
	case len(entrypoint) == 0:
		return errors.New("at least one -entrypoint is required")
	}
	s := spec{ref: *ref, entrypoint: entrypoint, labels: map[string]string{}, created: time.Unix(0, 0).UTC()}
	if *epoch != "" {
		sec, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: want seconds since the Unix epoch", *epoch)
		}
		s.created = time.Unix(sec, 0).UTC()
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q: want KEY=VALUE", l)
		}
		s.labels[k] = v
	}
	for _, p := range platforms {
		pf, err := parsePlatform(p)
		if err != nil {
			return err
		}
		s.platforms = append(s.platforms, pf)
	}
	idx, err := buildIndex(s)
	if err != nil {
		return err
	}
	if err := writeLayout(*layoutDir, idx, s.ref); err != nil {
		return fmt.Errorf("writing the layout: %w", err)
	}
	if *archive != "" {
		if err := writeArchive(*archive, *layoutDir, s.created); err != nil {
			return fmt.Errorf("writing the archive: %w", err)
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", s.ref, digest)
	return nil
}
