package llmd

import (
	"strconv"
	"strings"
)

const (
	// ExtProcPort is the EPP's ext_proc gRPC port, dialled by Envoy over loopback.
	ExtProcPort = 9002
	// DefaultRouteTimeoutSeconds is the route timeout when spec.router.requestTimeoutSeconds is
	// unset: one day, so long generations are not cut.
	DefaultRouteTimeoutSeconds = 86400

	routeTimeoutPlaceholder = "<ROUTE-TIMEOUT>"
)

// envoyTemplate is the router's static Envoy bootstrap. The header_mutation filter
// strips the client's x-gateway-destination-endpoint before ext_proc runs, so only the EPP picks the
// endpoint; failure_mode_allow lets requests through while the EPP is down.
const envoyTemplate = `static_resources:
  listeners:
  - name: http
    address:
      socket_address:
        address: 0.0.0.0
        port_value: 8081
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: router
          route_config:
            name: router
            virtual_hosts:
            - name: model
              domains: ["*"]
              routes:
              - match:
                  prefix: "/"
                route:
                  cluster: original_destination_cluster
                  timeout: <ROUTE-TIMEOUT>s
          access_log:
          - name: envoy.access_loggers.stdout
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
              log_format:
                json_format:
                  start_time: "%START_TIME%"
                  method: "%REQ(:METHOD)%"
                  path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"
                  protocol: "%PROTOCOL%"
                  response_code: "%RESPONSE_CODE%"
                  response_flags: "%RESPONSE_FLAGS%"
                  response_code_details: "%RESPONSE_CODE_DETAILS%"
                  duration: "%DURATION%"
                  upstream_host: "%UPSTREAM_HOST%"
                  request_id: "%REQ(X-REQUEST-ID)%"
                  bytes_received: "%BYTES_RECEIVED%"
                  bytes_sent: "%BYTES_SENT%"
          http_filters:
          - name: envoy.filters.http.header_mutation
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation
              mutations:
                request_mutations:
                - remove: x-gateway-destination-endpoint
          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              failure_mode_allow: true
              grpc_service:
                envoy_grpc:
                  cluster_name: ext_proc
                  authority: "localhost:9002"
                timeout: 10s
              processing_mode:
                request_header_mode: SEND
                response_header_mode: SEND
                request_body_mode: FULL_DUPLEX_STREAMED
                response_body_mode: FULL_DUPLEX_STREAMED
                request_trailer_mode: SEND
                response_trailer_mode: SEND
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: original_destination_cluster
    type: ORIGINAL_DST
    connect_timeout: 1s
    lb_policy: CLUSTER_PROVIDED
    original_dst_lb_config:
      use_http_header: true
      http_header_name: x-gateway-destination-endpoint
  - name: ext_proc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {}
    load_assignment:
      cluster_name: ext_proc
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address:
                address: 127.0.0.1
                port_value: 9002
`

// Envoy is the Envoy bootstrap (ConfigMap key envoy.yaml). Its one variable is the route timeout:
// requestTimeoutSeconds when set, else DefaultRouteTimeoutSeconds. The placeholder is replaced as a
// string, as upstream does, so the document is otherwise byte-identical to the template.
func Envoy(requestTimeoutSeconds *int32) string {
	timeout := DefaultRouteTimeoutSeconds
	if requestTimeoutSeconds != nil {
		timeout = int(*requestTimeoutSeconds)
	}
	return strings.ReplaceAll(envoyTemplate, routeTimeoutPlaceholder, strconv.Itoa(timeout))
}
