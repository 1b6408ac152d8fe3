//! SHA-256 as baton records it: of outputs, workflow sources, gate
//! artifacts and names. It imports nothing of the engine, so whatever
//! hashes can use it without reaching into the modules that create runs.

use sha2::{Digest, Sha256};

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// An output as the store records it: (path, sha256, bytes), whichever
/// driver records it.
pub(crate) fn artifact(path: String, bytes: &[u8]) -> (String, String, i64) {
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    (path, sha256_hex(bytes), size)
}
