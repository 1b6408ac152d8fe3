//! The `Host` values a request may carry: the names this server is
//! reached by, each with its port.

/// The `Host` values a request may carry: each allowed name with the
/// bound port.
#[derive(Debug)]
pub(crate) struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    /// Loopback's names, the name bound and the extra ones, each with `port`.
    pub(crate) fn new(bound: &str, port: u16, extra: &[String]) -> Hosts {
        let mut names: Vec<&str> = vec!["127.0.0.1", "localhost", "[::1]"];
        // A wildcard is not a name anyone reaches the server by.
        if !matches!(bound, "0.0.0.0" | "[::]" | "::" | "") {
            names.push(bound);
        }
        names.extend(extra.iter().map(String::as_str));
        let mut allowed = Vec::new();
        for name in names {
            let name = name.to_ascii_lowercase();
            allowed.push(format!("{name}:{port}"));
            // Browsers leave out the scheme's default port.
            if port == 80 {
                allowed.push(name);
            }
        }
        Hosts { allowed }
    }

    /// Whether a `Host` header names this server.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.allowed.contains(&host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_server_s_own_names_with_its_port_are_allowed() {
        let hosts = Hosts::new("127.0.0.1", 7777, &["build.example".to_owned()]);
        for host in [
            "127.0.0.1:7777",
            "localhost:7777",
            "LOCALHOST:7777",
            "[::1]:7777",
            "build.example:7777",
        ] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in [
            "",
            "127.0.0.1",
            "127.0.0.1:7778",
            "evil.example:7777",
            "localhost.evil.example:7777",
        ] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn a_wildcard_bind_is_no_name_and_port_80_may_be_left_out() {
        let hosts = Hosts::new("0.0.0.0", 80, &[]);
        assert!(hosts.allows("localhost"));
        assert!(hosts.allows("localhost:80"));
        assert!(!hosts.allows("0.0.0.0:80"));
    }
}
