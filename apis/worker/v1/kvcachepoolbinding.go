package v1

// BindingDomainClaimed is the KVCachePoolBinding condition saying whether the Binding holds its
// domain on its pool's master: the claim that keeps one domain name to one Binding per master.
const BindingDomainClaimed = "DomainClaimed"

// Reasons of the DomainClaimed condition.
const (
	// ReasonDomainClaimed: the Binding holds the claim of its domain on the master.
	ReasonDomainClaimed = "Claimed"
	// ReasonDomainTaken: another Binding holds the claim; this one gets no cache client.
	ReasonDomainTaken = "DomainTaken"
	// ReasonMasterUnknown: the pool the Binding names does not exist (or names no backend), so the
	// master the domain is claimed on is not known yet.
	ReasonMasterUnknown = "MasterUnknown"
)
