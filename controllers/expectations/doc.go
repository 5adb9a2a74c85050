// Package expectations remembers the objects a controller created and its cache has not shown yet,
// so that a reconcile on a lagging cache does not create the same member of a set twice.
package expectations
