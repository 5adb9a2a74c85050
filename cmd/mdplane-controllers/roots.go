package main

// The controllers dial Hugging Face and ModelScope over TLS with the system roots, and their image is
// FROM scratch: no /etc/ssl. This import carries Mozilla's root program in the binary; Go uses it
// only when the system has no roots, so a cluster's own bundle (mounted at /etc/ssl/certs, or named
// by SSL_CERT_FILE) still wins.
import _ "golang.org/x/crypto/x509roots/fallback"
