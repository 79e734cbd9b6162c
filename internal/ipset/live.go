package ipset

// PutLive adds or replaces entry e of s as the data plane holds it (a
// member a SET target added, or its new timeout), keeping the set's
// identity: the data plane's tables hold the member already.
func (s *Set) PutLive(e Entry) {
	e.Prefix = e.Prefix.Masked()
	s.put(e, -1)
}

// RemoveLive deletes member e of s as the data plane did (a SET target's
// --del-set, or a timeout), keeping the set's identity.
func (s *Set) RemoveLive(e Elem) { s.remove(e) }
