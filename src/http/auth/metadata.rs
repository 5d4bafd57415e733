//! OAuth 2.0 Protected Resource Metadata (RFC 9728) for the gateway: which resource this is and
//! which authorization server issues tokens for it. Served at
//! `/.well-known/oauth-protected-resource` and at that path with the endpoint's path appended
//! (RFC 9728 §3.1: `https://host/.well-known/oauth-protected-resource/mcp` for
//! `https://host/mcp`), which is where `WWW-Authenticate` points.

use serde_json::{Value, json};

pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document. `resource` is the gateway's canonical URL (the JWT audience).
pub fn document(resource: &str, issuer: Option<&str>, scopes: &[String]) -> Value {
    let mut doc = json!({
        "resource": resource,
        "bearer_methods_supported": ["header"],
        "resource_name": "airlock MCP gateway",
    });
    if let Some(issuer) = issuer {
        doc["authorization_servers"] = json!([issuer]);
    }
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc
}

/// Where the metadata of `resource` lives: the well-known path inserted between its origin and
/// its path. `None` when `resource` is not an absolute http(s) URL.
pub fn url_for(resource: &str) -> Option<String> {
    let (origin, path) = split_origin(resource)?;
    let path = path.trim_end_matches('/');
    Some(format!("{origin}{WELL_KNOWN}{path}"))
}

/// The request paths that serve the metadata of `resource`.
pub fn paths_for(resource: &str) -> Vec<String> {
    let path = split_origin(resource)
        .map(|(_, path)| path.trim_end_matches('/').to_string())
        .unwrap_or_default();
    let mut paths = vec![WELL_KNOWN.to_string()];
    if !path.is_empty() {
        paths.push(format!("{WELL_KNOWN}{path}"));
    }
    paths
}

/// `("https://host:port", "/path")` of an absolute http(s) URL without query or fragment.
pub fn split_origin(url: &str) -> Option<(&str, &str)> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    if url.contains(['?', '#']) {
        return None;
    }
    let scheme_len = url.len() - rest.len();
    let host_len = rest.find('/').unwrap_or(rest.len());
    if host_len == 0 {
        return None;
    }
    Some(url.split_at(scheme_len + host_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_path() {
        assert_eq!(
            url_for("https://mcp.example.com/mcp").as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            url_for("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080/.well-known/oauth-protected-resource")
        );
        assert_eq!(url_for("mcp.example.com/mcp"), None);
        assert_eq!(url_for("https://x/mcp#frag"), None);
        assert_eq!(
            paths_for("https://x/team/mcp/"),
            vec![WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/team/mcp")]
        );
    }

    #[test]
    fn the_document_names_resource_issuer_and_scopes() {
        let doc = document("https://x/mcp", Some("https://issuer"), &["mcp".into()]);
        assert_eq!(doc["resource"], "https://x/mcp");
        assert_eq!(doc["authorization_servers"], json!(["https://issuer"]));
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
        let bare = document("https://x/mcp", None, &[]);
        assert!(
            bare.get("authorization_servers").is_none() && bare.get("scopes_supported").is_none()
        );
    }
}
