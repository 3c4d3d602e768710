package identity

import (
	"net/url"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// WellKnownPath is where a resource's Protected Resource Metadata is served (RFC 9728 §3).
const WellKnownPath = "/.well-known/oauth-protected-resource"

// Metadata is the Protected Resource Metadata document (RFC 9728) of the gateway: an MCP
// client that is refused with 401 reads it to find the identity provider to sign in with.
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// ProtectedResourceMetadata is the metadata document of the gateway that auth.oidc cfg
// describes, named name (gateway.name). Tokens travel in the Authorization header only.
func ProtectedResourceMetadata(cfg config.OIDC, name string) Metadata {
	return Metadata{
		Resource:               cfg.Resource,
		AuthorizationServers:   []string{cfg.Issuer},
		ScopesSupported:        cfg.RequiredScopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           name,
	}
}

// MetadataURL is where the metadata of resource is served: the well-known path inserted
// between its host and its path (RFC 9728 §3.1), so https://gw.example.com/mcp has it at
// https://gw.example.com/.well-known/oauth-protected-resource/mcp. It is the resource_metadata
// of the gateway's WWW-Authenticate challenges.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPath(resource)
}

// MetadataPath is the path of MetadataURL(resource).
func MetadataPath(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return WellKnownPath
	}
	return WellKnownPath + strings.TrimSuffix(u.EscapedPath(), "/")
}
