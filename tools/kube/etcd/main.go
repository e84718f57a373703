// SPDX-License-Identifier: Apache-2.0

// Command etcd runs a single-member etcd server on loopback through etcd's
// embed package, for the tests that need a real kube-apiserver. It serves
// clients on --listen-client-urls, keeps its data in --data-dir and stops on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "the directory etcd keeps its data in (required)")
	clientURL := flag.String("listen-client-urls", "http://127.0.0.1:2379", "the loopback URL etcd serves clients on")
	peerURL := flag.String("listen-peer-urls", "http://127.0.0.1:2380", "the loopback URL etcd listens for peers on")
	flag.Parse()
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		os.Exit(2)
	}
	if err := run(*dataDir, *clientURL, *peerURL); err != nil {
		log.Fatalf("etcd: %v", err)
	}
}

func run(dataDir, clientURL, peerURL string) error {
	cu, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("--listen-client-urls: %w", err)
	}
	pu, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("--listen-peer-urls: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dataDir
	cfg.Name = "podsapi-test"
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return fmt.Errorf("not ready within 60 s")
	}
	log.Printf("etcd: serving clients on %s", cu)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
