// Package expectations remembers the writes a controller made that its cache has not shown yet: the
// members it created, so a reconcile on a lagging cache does not create the same member of a set
// twice, and the objects it deleted, so it does not delete them again.
package expectations
