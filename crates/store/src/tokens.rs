//! People's tokens for `baton serve`: a name and the SHA-256 of the token.
//!
//! The token itself is never stored: whoever reads the database learns
//! who has one, not what it is. Creating and revoking are single writes;
//! a name has at most one token, and revoking deletes its row.

use crate::columns::{Columns, FromColumns};
use crate::{Result, Store};

/// A token as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// Whose it is: recorded as who decided what it was used for.
    pub name: String,
    /// Hex SHA-256 of the token.
    pub sha256: String,
    /// When it was created (ms since the epoch).
    pub created_at: i64,
}

impl FromColumns for TokenRow {
    fn from_columns(row: &impl Columns) -> sqlx::Result<Self> {
        Ok(TokenRow {
            name: row.get("name")?,
            sha256: row.get("sha256")?,
            created_at: row.get("created_at")?,
        })
    }
}

impl Store {
    /// Records a token; `false` (and nothing written) when the name has
    /// one already.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn add_token(&self, token: &TokenRow) -> Result<bool> {
        let sql = "INSERT INTO tokens (name, sha256, created_at) VALUES ($1, $2, $3) \
                   ON CONFLICT DO NOTHING";
        let args = [
            (&token.name).into(),
            (&token.sha256).into(),
            token.created_at.into(),
        ];
        Ok(self.write(sql, &args, "add a token").await? == 1)
    }

    /// Every token, by name.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn tokens(&self) -> Result<Vec<TokenRow>> {
        let sql = "SELECT name, sha256, created_at FROM tokens ORDER BY name";
        self.fetch_all(sql, &[], "list tokens").await
    }

    /// The token with this hash, if one is recorded.
    ///
    /// # Errors
    ///
    /// The read fails.
    pub async fn token_by_hash(&self, sha256: &str) -> Result<Option<TokenRow>> {
        let sql = "SELECT name, sha256, created_at FROM tokens WHERE sha256 = $1";
        self.fetch_optional(sql, &[sha256.into()], "find a token")
            .await
    }

    /// Deletes a name's token; `false` when it had none.
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn revoke_token(&self, name: &str) -> Result<bool> {
        let sql = "DELETE FROM tokens WHERE name = $1";
        Ok(self.write(sql, &[name.into()], "revoke a token").await? == 1)
    }
}
