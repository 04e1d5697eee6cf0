// Command pulumi-resource-kubernetes serves the Kubernetes provider of the pinned provider module.
//
// The module's own cmd/pulumi-resource-kubernetes/main.go embeds schema-embed.json and
// terraform-mapping-embed.json, which its `go generate` writes and git ignores, so the module download
// lacks them and that main does not compile. e2e/build-tools.sh copies the module's schema.json (with the
// version set, as its generate.go does) and terraform-mapping.json beside this file before `go build`;
// neither copy is committed.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

// providerVersion is set with -ldflags -X main.providerVersion=<the module's release>.
var providerVersion = "unset"

func main() {
	provider.Serve("kubernetes", providerVersion, pulumiSchema, terraformMapping)
}
