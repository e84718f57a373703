package store

// Changed returns a channel that is closed at the next change the Find
// calls can see: a pod version written or deleted, or a fact of the
// container runtime kept or removed. FindPods with a wait takes it before
// it looks its key up, and looks up again, its own key only, when it is
// closed: a waiting call holds a channel shared by every waiter, never a
// goroutine or a copy of the store. The channel is made only while
// someone waits: a store without waiters makes none.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// signalChange closes the channel of Changed, when there is one. s.mu is
// held.
func (s *Store) signalChange() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}
