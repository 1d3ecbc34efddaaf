//! CONFIG GET: the settings by their Redis names.

use bytes::Bytes;
use quiver_resp::glob_match;

use crate::errors::{err, unknown_subcommand, wrong_arity};
use crate::reply::Reply;
use crate::service::Core;

/// CONFIG for a service on `core`, whose own settings beyond the service's are `more` (a
/// node's: `NodeConfig::values`).
pub fn run(core: &Core, more: Vec<(&'static str, String)>, args: &[Bytes]) -> Reply {
    config(core, more, args)
}

/// The service's settings CONFIG GET reports, by Redis name.
fn config_values(core: &Core) -> Vec<(&'static str, String)> {
    let c = &core.config;
    vec![
        ("bind", c.bind.to_string()),
        ("port", core.port.to_string()),
        ("unixsocket", path_or_empty(&c.unixsocket)),
        ("databases", c.databases.to_string()),
        ("maxclients", c.maxclients.to_string()),
        ("timeout", c.timeout.to_string()),
        ("proto-max-bulk-len", c.proto_max_bulk_len.to_string()),
        (
            "client-query-buffer-limit",
            c.client_query_buffer_limit.to_string(),
        ),
        (
            "client-output-buffer-limit",
            format!("normal {} 0 0", c.client_output_buffer_limit),
        ),
        (
            "client-output-buffer-total-limit",
            c.client_output_buffer_total_limit.to_string(),
        ),
        (
            "protected-mode",
            if c.protected_mode { "yes" } else { "no" }.into(),
        ),
        ("requirepass", c.requirepass.clone().unwrap_or_default()),
        ("aclfile", path_or_empty(&c.aclfile)),
        ("tls-port", c.tls_port.unwrap_or_default().to_string()),
        ("tls-cert-file", path_or_empty(&c.tls_cert_file)),
        ("tls-key-file", path_or_empty(&c.tls_key_file)),
        ("tls-ca-cert-file", path_or_empty(&c.tls_ca_cert_file)),
        ("tls-auth-clients", c.tls_auth_clients.to_string()),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
    ]
}

/// A path setting as CONFIG GET shows it: empty when unset.
fn path_or_empty(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

/// CONFIG GET pattern [pattern ...]; CONFIG SET is refused (settings are fixed at start).
fn config(core: &Core, more: Vec<(&'static str, String)>, args: &[Bytes]) -> Reply {
    let sub = args[1].to_ascii_lowercase();
    match &sub[..] {
        b"get" => {
            if args.len() < 3 {
                return wrong_arity("config|get");
            }
            let mut values = config_values(core);
            values.extend(more);
            let mut found = Vec::new();
            for (name, value) in &values {
                let matched = args[2..]
                    .iter()
                    .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()));
                if matched {
                    found.push((Reply::text(*name), Reply::text(value.as_str())));
                }
            }
            Reply::Map(found)
        }
        b"set" | b"rewrite" | b"resetstat" => {
            err("ERR Quiver's settings are fixed at start: edit the config file and restart")
        }
        b"help" => Reply::Array(vec![
            Reply::simple("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
            Reply::simple("GET <pattern>"),
            Reply::simple(
                "    Return parameters matching the glob-like <pattern> and their values.",
            ),
            Reply::simple("HELP"),
            Reply::simple("    Print this help."),
        ]),
        _ => unknown_subcommand(&args[1], "CONFIG"),
    }
}
