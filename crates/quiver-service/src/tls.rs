//! TLS on a port of its own (Redis 6's settings: `tls-port`, `tls-cert-file`, `tls-key-file`,
//! `tls-ca-cert-file`, `tls-auth-clients`), with rustls on the ring provider. A TLS connection,
//! once its handshake is done, is served exactly as a plain one (`conn::serve` takes any
//! stream); the plain port stays open beside it.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Longest a client may take over its handshake before the connection is dropped: a client
/// that connects and sends nothing must not hold a handshake slot for ever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to tell the operator about a failed handshake, beyond the error: a client certificate
/// of X.509 version 1 (what `openssl x509 -req` makes without an extension file) is refused by
/// rustls's verifier, which accepts version 3 only; the README says how to make one.
pub fn handshake_hint(e: &std::io::Error) -> Option<&'static str> {
    e.to_string().contains("UnsupportedCertVersion").then_some(
        "the client certificate is X.509 v1; only v3 is accepted (README, TLS: make one with \
         openssl x509 -req ... -extfile)",
    )
}
/// Handshakes in progress at once; a connection arriving past this is closed at once (the
/// accepted-but-not-yet-a-client connections are not bounded by `maxclients`).
pub const HANDSHAKES_MAX: usize = 1024;

/// Redis's `tls-auth-clients`: whether a client must present a certificate the CA signed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthClients {
    /// Required (Redis's default).
    #[default]
    Yes,
    /// Not asked for.
    No,
    /// Verified if presented, else the client is let in.
    Optional,
}

impl FromStr for AuthClients {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "yes" => Ok(AuthClients::Yes),
            "no" => Ok(AuthClients::No),
            "optional" => Ok(AuthClients::Optional),
            _ => Err(format!(
                "unknown tls-auth-clients {s:?} (expected yes, no or optional)"
            )),
        }
    }
}

impl fmt::Display for AuthClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        })
    }
}

/// The `tls-*` settings (`Config::tls` lends them).
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    pub port: Option<u16>,
    pub cert_file: Option<&'a Path>,
    pub key_file: Option<&'a Path>,
    pub ca_cert_file: Option<&'a Path>,
    pub auth_clients: AuthClients,
}

impl Settings<'_> {
    /// The settings' own consistency (files are read later, by [`Settings::acceptor`]).
    pub fn validate(&self) -> Result<(), String> {
        if self.port.is_none() {
            return Ok(());
        }
        if self.cert_file.is_none() || self.key_file.is_none() {
            return Err("tls-port needs tls-cert-file and tls-key-file".into());
        }
        if self.auth_clients != AuthClients::No && self.ca_cert_file.is_none() {
            return Err(format!(
                "tls-auth-clients {} needs tls-ca-cert-file (the CA that signs client \
                 certificates), or set tls-auth-clients no",
                self.auth_clients
            ));
        }
        Ok(())
    }

    /// The acceptor of the TLS port, from the certificate, key and CA files; `None` without a
    /// `tls-port`. Errors name the file and what is wrong with it.
    pub fn acceptor(&self) -> Result<Option<TlsAcceptor>, String> {
        if self.port.is_none() {
            return Ok(None);
        }
        self.validate()?;
        let (Some(cert_file), Some(key_file)) = (self.cert_file, self.key_file) else {
            return Err("tls-port needs tls-cert-file and tls-key-file".into());
        };
        let certs = read_certs(cert_file, "tls-cert-file")?;
        let key = PrivateKeyDer::from_pem_file(key_file)
            .map_err(|e| format!("tls-key-file {}: {e}", key_file.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match (self.ca_cert_file, self.auth_clients) {
            (_, AuthClients::No) | (None, _) => builder.with_no_client_auth(),
            (Some(ca_file), auth) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certs(ca_file, "tls-ca-cert-file")? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("tls-ca-cert-file {}: {e}", ca_file.display()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = match auth {
                    AuthClients::Optional => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| format!("tls-ca-cert-file {}: {e}", ca_file.display()))?,
                )
            }
        };
        let server = builder.with_single_cert(certs, key).map_err(|e| {
            format!(
                "tls-cert-file {} with tls-key-file {}: {e}",
                cert_file.display(),
                key_file.display()
            )
        })?;
        Ok(Some(TlsAcceptor::from(Arc::new(server))))
    }
}

/// Every certificate of a PEM file; at least one.
fn read_certs(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{setting} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{setting} {}: no certificate in the file",
            path.display()
        ));
    }
    Ok(certs)
}
