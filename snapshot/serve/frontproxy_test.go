package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestTheFrontProxyNamesTheUserInTheHeadersItsConfigMapGives(t *testing.T) {
	authority := newCA(t)
	cases := []struct {
		name    string
		data    map[string]string
		headers http.Header
		want    User
		err     string
	}{
		{name: "the ConfigMap's header names are read",
			data: map[string]string{"requestheader-username-headers": `["X-Who"]`, "requestheader-group-headers": `["X-Teams"]`,
				"requestheader-extra-headers-prefix": `["X-Also-"]`},
			headers: http.Header{"X-Who": {"alice"}, "X-Teams": {"a", "b"}, "X-Also-Scopes": {"s1"}, "X-Remote-User": {"mallory"}},
			want:    User{Name: "alice", Groups: []string{"a", "b"}, Extra: map[string][]string{"scopes": {"s1"}}}},
		{name: "without header names the standard ones are read",
			headers: http.Header{"X-Remote-User": {"alice"}, "X-Remote-Group": {"system:authenticated"}, "X-Remote-Extra-Reason": {"r"}},
			want:    User{Name: "alice", Groups: []string{"system:authenticated"}, Extra: map[string][]string{"reason": {"r"}}}},
		{name: "an empty allowed-names list admits any certificate of the CA", data: map[string]string{"requestheader-allowed-names": `[]`},
			headers: http.Header{"X-Remote-User": {"alice"}}, want: User{Name: "alice", Extra: map[string][]string{}}},
		{name: "a ConfigMap without the requestheader CA says which flag is missing", data: map[string]string{"requestheader-client-ca-file": ""},
			err: "kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: start the kube-apiserver with --requestheader-client-ca-file"},
		{name: "a header list that is not JSON is named", data: map[string]string{"requestheader-group-headers": "X-Remote-Group"},
			err: "kube-system/extension-apiserver-authentication: requestheader-group-headers is not a JSON list: invalid character 'X' looking for beginning of value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string]string{"requestheader-client-ca-file": authority.pem}
			for k, v := range tc.data {
				data[k] = v
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: "kube-system"}, Data: data}
			f := &FrontProxy{Reader: fake.NewClientBuilder().WithObjects(cm).Build()}
			cert := authority.client(t, "anyone")
			leaf, _ := x509.ParseCertificate(cert.Certificate[0])
			r := &http.Request{Header: tc.headers, TLS: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}}
			u, err := f.Authenticate(context.Background(), r)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, u); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
