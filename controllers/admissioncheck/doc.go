// Package admissioncheck is the Kueue AdmissionCheck controller that holds every replica group of a
// ModelDeployment until the whole set has reserved quota.
package admissioncheck
