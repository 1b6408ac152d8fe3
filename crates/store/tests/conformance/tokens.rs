//! People's tokens: found by hash, one per name, gone once revoked.

use std::sync::Arc;

use baton_store::TokenRow;
use tokio::sync::Barrier;

use crate::harness::Fresh;

fn token(name: &str, sha256: &str, created_at: i64) -> TokenRow {
    TokenRow {
        name: name.to_owned(),
        sha256: sha256.to_owned(),
        created_at,
    }
}

pub(crate) async fn a_token_is_found_by_its_hash_until_revoked(fresh: Fresh) {
    let store = fresh.open().await;
    assert!(store.tokens().await.unwrap().is_empty());
    assert!(store.add_token(&token("bob", "b0b", 2_000)).await.unwrap());
    assert!(
        store
            .add_token(&token("alice", "a11ce", 1_000))
            .await
            .unwrap()
    );

    assert_eq!(
        store.token_by_hash("a11ce").await.unwrap(),
        Some(token("alice", "a11ce", 1_000))
    );
    assert_eq!(store.token_by_hash("nope").await.unwrap(), None);
    let names: Vec<String> = store
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.name)
        .collect();
    assert_eq!(names, ["alice", "bob"]);

    assert!(store.revoke_token("alice").await.unwrap());
    assert!(!store.revoke_token("alice").await.unwrap(), "revoked once");
    assert_eq!(store.token_by_hash("a11ce").await.unwrap(), None);
    assert_eq!(
        store.token_by_hash("b0b").await.unwrap(),
        Some(token("bob", "b0b", 2_000))
    );
}

pub(crate) async fn a_name_has_one_token(fresh: Fresh) {
    let store = fresh.open().await;
    assert!(
        store
            .add_token(&token("alice", "first", 1_000))
            .await
            .unwrap()
    );
    assert!(
        !store
            .add_token(&token("alice", "second", 2_000))
            .await
            .unwrap(),
        "a second token for a name is refused"
    );
    assert_eq!(store.token_by_hash("second").await.unwrap(), None);
    assert_eq!(
        store.token_by_hash("first").await.unwrap(),
        Some(token("alice", "first", 1_000))
    );
    // Once revoked, the name may have a new one.
    assert!(store.revoke_token("alice").await.unwrap());
    assert!(
        store
            .add_token(&token("alice", "second", 3_000))
            .await
            .unwrap()
    );
    assert_eq!(
        store.tokens().await.unwrap(),
        [token("alice", "second", 3_000)]
    );
}

pub(crate) async fn concurrent_creations_of_one_name_record_one(fresh: Fresh) {
    const CREATORS: usize = 8;
    let store = fresh.open().await;
    let barrier = Arc::new(Barrier::new(CREATORS));
    let tasks: Vec<_> = (0..CREATORS)
        .map(|n| {
            let (store, barrier) = (store.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .add_token(&token("alice", &format!("hash{n}"), 1_000))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut recorded = 0;
    for task in tasks {
        recorded += usize::from(task.await.unwrap());
    }
    assert_eq!(recorded, 1);
    assert_eq!(store.tokens().await.unwrap().len(), 1);
}
