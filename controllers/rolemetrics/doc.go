// Package rolemetrics exports what a platform team dashboards per deployment and role: gauges of
// each role's replicas (declared, standing, Ready, up to date, holding quota, parked) and of its
// rollout and retirement in flight, read from the controllers' cache at each scrape, and histograms
// of a replica's time to admission and to Ready and of a rollout step's time.
package rolemetrics
