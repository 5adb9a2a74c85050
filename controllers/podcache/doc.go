// Package podcache is the cache transform of the Pods mdplane-controllers cache: it keeps of each
// Pod what the controllers read and drops what none does.
package podcache
