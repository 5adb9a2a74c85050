// Package qualification decides, per replica, whether its serving members may take traffic
// and which of them carry the eligibility label; pure, so that the
// members controller, which sees a replica's Pods, applies what it decides.
package qualification
