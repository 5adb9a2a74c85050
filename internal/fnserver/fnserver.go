// Package fnserver is the command line every mdplane composition function serves with, the way
// Crossplane runs a Function package: mTLS from TLS_SERVER_CERTS_DIR, or --insecure for local
// development and `crossplane render`.
package fnserver

import (
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/alecthomas/kong"
	"github.com/crossplane/function-sdk-go"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
)

// CLI holds the flags of a function server.
type CLI struct {
	Debug              bool   `short:"d" help:"Emit debug logs in addition to info logs."`
	Network            string `default:"tcp" help:"Network on which to listen for gRPC connections."`
	Address            string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir        string `env:"TLS_SERVER_CERTS_DIR" help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)."`
	Insecure           bool   `help:"Run without mTLS credentials. Only for local development."`
	MetricsAddress     string `default:":8080" help:"Address of the Prometheus metrics endpoint; empty disables it."`
	MaxRecvMessageSize int    `default:"32" help:"Largest gRPC message the function accepts, in MiB. A composite's request carries everything it composes."`
	PprofAddress       string `help:"Address of the Go profiling endpoints (/debug/pprof); empty disables them."`
}

// Main parses the command line and serves the function newFunction builds until the process ends.
func Main(description string, newFunction func(log logging.Logger) fnv1.FunctionRunnerServiceServer) {
	var c CLI
	ctx := kong.Parse(&c, kong.Description(description))
	ctx.FatalIfErrorf(c.serve(newFunction))
}

func (c *CLI) serve(newFunction func(log logging.Logger) fnv1.FunctionRunnerServiceServer) error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	if c.PprofAddress != "" {
		go func() {
			mux := http.NewServeMux()
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			srv := &http.Server{Addr: c.PprofAddress, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			log.Info("profiling endpoints stopped", "error", srv.ListenAndServe())
		}()
	}
	return function.Serve(newFunction(log),
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.WithMetricsServer(c.MetricsAddress),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024))
}
