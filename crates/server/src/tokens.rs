//! People's tokens: made here, kept in the store only as their SHA-256.
//!
//! A token is 32 bytes from the system's random source, written as hex
//! after a `baton_` prefix (so a leaked one is recognisable in a scan).
//! Requests are checked by hashing what they carry and looking the hash
//! up: the store never compares secrets, and a stolen database does not
//! let anyone in.

use std::io::Read;

use baton_store::{Store, TokenRow};

/// Why a token was not made or revoked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The name has a token already.
    #[error("{0} has a token already; `baton token revoke {0}` first to make a new one")]
    Exists(String),
    /// No token has that name.
    #[error("no token is named '{0}' (`baton token list` lists them)")]
    NoSuchName(String),
    /// The name cannot be a name.
    #[error(
        "a token's name is 1 to 64 characters, letters, digits, '.', '_', '-' or '@', got '{0}'"
    )]
    BadName(String),
    /// The random source could not be read.
    #[error("cannot read the system's random source")]
    Random(#[source] std::io::Error),
}

/// Makes a token for `name`, records its hash, and returns the token:
/// the only time it exists outside the person's hands.
///
/// # Errors
///
/// A bad or taken name, the random source or the store failed.
pub async fn create(store: &Store, name: &str, now_ms: i64) -> Result<String, Error> {
    if !valid_name(name) {
        return Err(Error::BadName(name.to_owned()));
    }
    let mut bytes = [0_u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(Error::Random)?;
    let token = format!("baton_{}", hex(&bytes));
    let row = TokenRow {
        name: name.to_owned(),
        sha256: hash(&token),
        created_at: now_ms,
    };
    if store.add_token(&row).await? {
        Ok(token)
    } else {
        Err(Error::Exists(name.to_owned()))
    }
}

/// Every token's name and creation time (their hashes too, which are of
/// no use to anyone).
///
/// # Errors
///
/// The store failed.
pub async fn list(store: &Store) -> Result<Vec<TokenRow>, Error> {
    Ok(store.tokens().await?)
}

/// Revokes `name`'s token.
///
/// # Errors
///
/// No token has that name, or the store failed.
pub async fn revoke(store: &Store, name: &str) -> Result<(), Error> {
    if store.revoke_token(name).await? {
        Ok(())
    } else {
        Err(Error::NoSuchName(name.to_owned()))
    }
}

/// Whose token this is, if it is one.
pub(crate) async fn owner(store: &Store, token: &str) -> baton_store::Result<Option<String>> {
    Ok(store.token_by_hash(&hash(token)).await?.map(|row| row.name))
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

fn hash(token: &str) -> String {
    baton_engine::create::sha256_hex(token.as_bytes())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_is_stored_as_its_hash_and_names_its_owner() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("baton.db"))
            .await
            .unwrap();
        let token = create(&store, "alice", 1_000).await.unwrap();
        assert!(
            token.starts_with("baton_") && token.len() == 6 + 64,
            "{token}"
        );
        let rows = list(&store).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_ne!(rows[0].sha256, token);
        assert_eq!(rows[0].sha256, hash(&token));
        assert_eq!(
            owner(&store, &token).await.unwrap().as_deref(),
            Some("alice")
        );
        assert_eq!(owner(&store, "baton_00").await.unwrap(), None);

        assert!(matches!(
            create(&store, "alice", 2_000).await,
            Err(Error::Exists(_))
        ));
        let other = create(&store, "bob", 2_000).await.unwrap();
        assert_ne!(other, token, "tokens are random");

        revoke(&store, "alice").await.unwrap();
        assert_eq!(owner(&store, &token).await.unwrap(), None);
        assert!(matches!(
            revoke(&store, "alice").await,
            Err(Error::NoSuchName(_))
        ));
    }

    #[test]
    fn names_are_short_and_plain() {
        for name in ["alice", "a.b-c_d@example.com", "x"] {
            assert!(valid_name(name), "{name}");
        }
        for name in ["", "<script>", "a b", "ä", &"a".repeat(65)] {
            assert!(!valid_name(name), "{name}");
        }
    }
}
