// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"log"
	"os"
	"sync"
	"time"
)

// Created is a line of the events file: a container the fake created,
// when.
type Created struct {
	// ContainerID is the container's ID.
	ContainerID string `json:"container_id"`
	// PodUID is the UID of its sandbox's pod.
	PodUID string `json:"pod_uid"`
	// Name is the container's name.
	Name string `json:"name"`
	// CreatedUnixNano is when the fake created it (before NRI hears of it).
	CreatedUnixNano int64 `json:"created_unix_nano"`
}

// eventsFile records the containers the fake creates, a JSON object a
// line, written as they are created (one write each, so that a reader
// sees every complete line at once), at most max lines.
type eventsFile struct {
	mu  sync.Mutex
	f   *os.File
	n   int
	max int
}

// openEvents creates (or truncates) path.
func openEvents(path string, max int) (*eventsFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &eventsFile{f: f, max: max}, nil
}

// created records a container created at t; past max lines it records
// nothing more, and says so once.
func (e *eventsFile) created(id, podUID, name string, t time.Time) {
	if e == nil {
		return
	}
	line, err := json.Marshal(Created{ContainerID: id, PodUID: podUID, Name: name, CreatedUnixNano: t.UnixNano()})
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == e.max {
		log.Printf("fakecri: the events file is full (%d lines): no more containers recorded", e.max)
		e.n++
	}
	if e.n > e.max {
		return
	}
	e.n++
	if _, err := e.f.Write(append(line, '\n')); err != nil {
		log.Printf("fakecri: events file: %v", err)
	}
}

func (e *eventsFile) close() {
	if e != nil {
		e.f.Close()
	}
}
