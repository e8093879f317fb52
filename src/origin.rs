//! Browsers are not callers (an invariant of ARCHITECTURE.md): the rules that
//! tell a request a web page made from one mirai should serve.
//!
//! - An `Origin` header must name a loopback origin (`http://localhost:3000`,
//!   `http://127.0.0.1`, `http://[::1]:8080`) or one listed in
//!   `MIRAI_ALLOWED_ORIGINS`, or be exactly the `scheme://host:port` the
//!   request was sent to (mirai's own page) while its `Host` passes the rule
//!   below or a token is set; `Origin: null` is foreign.
//! - While no token is set, the `Host` header must name this machine: a
//!   loopback name, its host name, the address it listens on, one of its
//!   interface addresses, or a name listed in `MIRAI_ALLOWED_HOSTS`. A page
//!   that rebinds its own name to 127.0.0.1 still sends that name as `Host`.
//!
//! Pure rules, no HTTP types: `config/server.rs` validates the settings with the same
//! parsers the HTTP adapter checks requests with.

use std::net::IpAddr;

use url::{Host, Url};

/// An origin as compared: `scheme://host[:port]`, lowercase, default port
/// left out. `None` for what is not an origin with a host (`null`, garbage,
/// a URL with a path, query or user information).
pub fn origin_key(raw: &str) -> Option<String> {
    let url = Url::parse(raw.trim()).ok()?;
    let plain = url.username().is_empty()
        && url.password().is_none()
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none();
    let host = url.host_str().filter(|h| !h.is_empty() && plain)?;
    Some(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// `http(s)://` on a loopback host, any port.
pub fn is_loopback_origin(raw: &str) -> bool {
    origin_key(raw)
        .and_then(|key| Url::parse(&key).ok())
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .and_then(|url| url.host().map(|h| h.to_owned()))
        .is_some_and(|host| is_loopback(&host))
}

/// Whether origin `key` (as [`origin_key`] gives it) is exactly the
/// `scheme://host:port` a request was sent to: `scheme` the request's, `host`
/// its `Host` header. A page mirai served, opened by any name, sends this.
pub fn is_own_origin(key: &str, scheme: &str, host: &str) -> bool {
    host_of(host).is_some()
        && origin_key(&format!("{scheme}://{}", host.trim())).as_deref() == Some(key)
}

/// The host a `Host` header (or a configured name) names, port dropped:
/// `None` when it is not a plain `host[:port]`.
pub fn host_of(raw: &str) -> Option<Host> {
    let raw = raw.trim();
    let plain = !raw.is_empty()
        && !raw.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '/' | '\\' | '@' | '?' | '#')
        });
    if !plain {
        return None;
    }
    let url = Url::parse(&format!("http://{raw}/")).ok()?;
    match url.host()?.to_owned() {
        // `localhost.` is `localhost`: a trailing dot only makes the name absolute.
        Host::Domain(name) => {
            let name = name.strip_suffix('.').unwrap_or(&name).to_string();
            (!name.is_empty()).then_some(Host::Domain(name))
        }
        ip => Some(ip),
    }
}

/// `localhost`, 127.0.0.0/8, `::1` (and `::ffff:127.x.y.z`).
pub fn is_loopback(host: &Host) -> bool {
    match host {
        Host::Domain(name) => name == "localhost",
        Host::Ipv4(ip) => ip.is_loopback(),
        Host::Ipv6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// A comma-separated list of origins (`MIRAI_ALLOWED_ORIGINS`), each as
/// [`origin_key`] compares it; the first malformed entry is the error.
pub fn parse_origins(raw: &str) -> Result<Vec<String>, String> {
    entries(raw)
        .map(|entry| origin_key(entry).ok_or_else(|| entry.to_string()))
        .collect()
}

/// A comma-separated list of host names or addresses (`MIRAI_ALLOWED_HOSTS`),
/// an optional port ignored; the first malformed entry is the error.
pub fn parse_hosts(raw: &str) -> Result<Vec<String>, String> {
    entries(raw)
        .map(|entry| {
            host_of(entry)
                .map(|host| host.to_string())
                .ok_or_else(|| entry.to_string())
        })
        .collect()
}

fn entries(raw: &str) -> impl Iterator<Item = &str> {
    raw.split(',')
        .map(|entry| entry.trim().trim_end_matches('/'))
        .filter(|entry| !entry.is_empty())
}

/// The names this machine answers to, for the `Host` check.
#[derive(Debug, Clone)]
pub struct OwnNames {
    /// The host name, the listen address when it is not a wildcard, and the
    /// operator's list, each as [`Host`]'s text.
    names: Vec<String>,
}

impl OwnNames {
    /// `listen` is the address mirai listens on (`HOST`); `allowed` the
    /// already-parsed `MIRAI_ALLOWED_HOSTS`.
    pub fn new(listen: &str, allowed: &[String]) -> OwnNames {
        let mut names = allowed.to_vec();
        let hostname = nix::unistd::gethostname()
            .ok()
            .and_then(|name| name.into_string().ok());
        for name in hostname.iter().map(String::as_str).chain([listen]) {
            match host_of(name) {
                Some(Host::Ipv4(ip)) if ip.is_unspecified() => {}
                Some(Host::Ipv6(ip)) if ip.is_unspecified() => {}
                Some(host) => names.push(host.to_string()),
                None => {}
            }
        }
        OwnNames { names }
    }

    /// Whether a `Host` header names this machine.
    pub fn allows(&self, host_header: &str) -> bool {
        let Some(host) = host_of(host_header) else {
            return false;
        };
        if is_loopback(&host) || self.names.contains(&host.to_string()) {
            return true;
        }
        // Addresses can change while mirai runs (DHCP, a container's network), so
        // they are read when an address is asked for, not once.
        let ip: IpAddr = match host {
            Host::Ipv4(ip) => ip.into(),
            Host::Ipv6(ip) => ip.into(),
            Host::Domain(_) => return false,
        };
        interface_addresses().contains(&ip)
    }
}

/// Every address of every network interface (empty when they cannot be read).
fn interface_addresses() -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    interfaces
        .filter_map(|interface| {
            let address = interface.address?;
            address
                .as_sockaddr_in()
                .map(|v4| IpAddr::from(v4.ip()))
                .or_else(|| address.as_sockaddr_in6().map(|v6| IpAddr::from(v6.ip())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_by_scheme_host_and_port() {
        assert_eq!(
            origin_key("HTTPS://Notes.Example:443").as_deref(),
            Some("https://notes.example")
        );
        assert_eq!(
            origin_key("http://notes.example:8080/").as_deref(),
            Some("http://notes.example:8080")
        );
        for foreign in [
            "null",
            "",
            "notes.example",
            "http://a/b",
            "http://u@a",
            "http://a?x",
        ] {
            assert_eq!(origin_key(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn loopback_origins_are_http_on_loopback_hosts() {
        for local in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://127.8.9.10:1",
            "http://[::1]:8080",
        ] {
            assert!(is_loopback_origin(local), "{local}");
        }
        for foreign in [
            "null",
            "http://localhost.evil.example",
            "http://evil.example",
            "file://localhost",
            "http://10.0.0.1",
        ] {
            assert!(!is_loopback_origin(foreign), "{foreign}");
        }
    }

    #[test]
    fn an_own_origin_is_the_scheme_and_host_the_request_was_sent_to() {
        let key = |raw: &str| origin_key(raw).unwrap();
        assert!(is_own_origin(
            &key("http://notes.lan:4567"),
            "http",
            "notes.lan:4567"
        ));
        assert!(is_own_origin(
            &key("http://Notes.LAN:4567"),
            "http",
            "notes.lan:4567"
        ));
        assert!(is_own_origin(
            &key("https://notes.lan"),
            "https",
            "notes.lan:443"
        ));
        for (origin, scheme, host) in [
            ("http://notes.lan:4567", "http", "notes.lan:4568"),
            ("http://notes.lan:4567", "https", "notes.lan:4567"),
            ("http://evil.example:4567", "http", "notes.lan:4567"),
            ("http://notes.lan", "http", "notes.lan/x"),
            ("http://notes.lan", "http", ""),
        ] {
            assert!(
                !is_own_origin(&key(origin), scheme, host),
                "{origin} {host}"
            );
        }
    }

    #[test]
    fn hosts_drop_their_port_and_refuse_what_is_not_a_name() {
        assert_eq!(
            host_of("LocalHost.:4567"),
            Some(Host::Domain("localhost".into()))
        );
        assert_eq!(
            host_of("[::1]:80").map(|h| h.to_string()).as_deref(),
            Some("[::1]")
        );
        for bad in ["", "evil@localhost", "a/b", "a b", "local\nhost", "[::1"] {
            assert_eq!(host_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn settings_lists_name_their_first_bad_entry() {
        assert_eq!(
            parse_origins(" http://a.example:8080/ ,https://B.example").unwrap(),
            ["http://a.example:8080", "https://b.example"]
        );
        assert_eq!(parse_origins("http://a.example,*").unwrap_err(), "*");
        assert_eq!(
            parse_hosts("notes.example:443, 10.0.0.5").unwrap(),
            ["notes.example", "10.0.0.5"]
        );
        assert_eq!(parse_hosts("ok.example,bad/host").unwrap_err(), "bad/host");
    }

    #[test]
    fn own_names_are_loopback_the_listen_address_and_the_list() {
        let names = OwnNames::new("192.0.2.7", &["notes.example".to_string()]);
        for ok in [
            "localhost:4567",
            "127.0.0.1",
            "[::1]:1",
            "192.0.2.7:4567",
            "Notes.Example",
        ] {
            assert!(names.allows(ok), "{ok}");
        }
        assert!(!names.allows("rebind.evil.example"));
        assert!(!names.allows("rebind.evil.example@localhost"));
        let wildcard = OwnNames::new("0.0.0.0", &[]);
        assert!(!wildcard.allows("0.0.0.0"));
    }
}
