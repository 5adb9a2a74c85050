// Package llmd builds llm-d-router's configuration documents: the EndpointPickerConfig the EPP
// reads (epp.yaml), the Envoy bootstrap in front of it (envoy.yaml), and the selector and metric
// names both are keyed to. Each builder takes values and returns a document; nothing here depends
// on replica counts or Pod addresses, so scaling a role never changes what the router is hashed on.
package llmd
