//! The operating system's account running baton, for naming the person
//! behind a decision when nothing more specific is known.

/// The name the system's user database (`/etc/passwd`, or whatever NSS is
/// configured to ask) gives the real user id, or `None` when it has none.
pub fn os_user_name() -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|user| user.name)
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_running_user_has_a_name() {
        // Every test machine runs as an account listed in its user database.
        let name = super::os_user_name().expect("a name for this uid");
        assert!(!name.is_empty() && !name.contains(':'), "{name}");
    }
}
