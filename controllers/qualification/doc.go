// Package qualification decides, per replica, whether its serving members may take traffic
// (elastic-dp-lifecycle §2.3) and which of them carry the eligibility label (§2.5); pure, so that the
// members controller, which sees a replica's Pods, applies what it decides.
package qualification
