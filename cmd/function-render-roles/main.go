// Command function-render-roles serves the render-roles composition function over gRPC, the way
// Crossplane runs a Function package: mTLS from TLS_SERVER_CERTS_DIR, or --insecure for local
// development and `crossplane render`.
package main

import (
	"github.com/alecthomas/kong"
	"github.com/crossplane/function-sdk-go"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

type cli struct {
	Debug              bool   `short:"d" help:"Emit debug logs in addition to info logs."`
	Network            string `default:"tcp" help:"Network on which to listen for gRPC connections."`
	Address            string `default:":9443" help:"Address at which to listen for gRPC connections."`
	TLSCertsDir        string `env:"TLS_SERVER_CERTS_DIR" help:"Directory containing server certs (tls.key, tls.crt) and the CA used to verify client certificates (ca.crt)."`
	Insecure           bool   `help:"Run without mTLS credentials. Only for local development."`
	MetricsAddress     string `default:":8080" help:"Address of the Prometheus metrics endpoint; empty disables it."`
	MaxRecvMessageSize int    `default:"32" help:"Largest gRPC message the function accepts, in MiB. A ModelRole's request carries every observed replica."`
}

func (c *cli) Run() error {
	log, err := function.NewLogger(c.Debug)
	if err != nil {
		return err
	}
	return function.Serve(&renderroles.Function{Log: log},
		function.Listen(c.Network, c.Address),
		function.MTLSCertificates(c.TLSCertsDir),
		function.Insecure(c.Insecure),
		function.WithMetricsServer(c.MetricsAddress),
		function.MaxRecvMessageSize(c.MaxRecvMessageSize*1024*1024))
}

func main() {
	ctx := kong.Parse(&cli{}, kong.Description("The mdplane render-roles composition function."))
	ctx.FatalIfErrorf(ctx.Run())
}
