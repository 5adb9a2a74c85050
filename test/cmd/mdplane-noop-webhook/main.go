// Command mdplane-noop-webhook is an admission webhook that allows every request at once:
// mdplane-bench-webhooks registers it the way mdplane's validating webhook is registered, so the
// latency a webhook adds at all is measured beside what mdplane's adds, in the same run. It serves
// HTTPS on :9443 with the key pair in /certs.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	})
	server := &http.Server{Addr: ":9443", ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(server.ListenAndServeTLS("/certs/tls.crt", "/certs/tls.key"))
}
