//! The scope a `baton state` command works on, as its flags name it, and
//! who acts in it when no `--as` says.

use baton_engine::governance::{Identity, Scope, ScopeKind};

use crate::args::state::ScopeArgs;

/// The scope named by the flags.
pub(super) fn scope(args: &ScopeArgs) -> Scope {
    let (kind, key) = match (&args.run, &args.task, &args.session) {
        (Some(run), _, _) => (ScopeKind::Run, run),
        (_, Some(task), _) => (ScopeKind::Task, task),
        (_, _, Some(session)) => (ScopeKind::Session, session),
        // clap's required group guarantees one.
        _ => unreachable!("one scope flag is required"),
    };
    Scope {
        kind,
        key: key.clone(),
    }
}

/// The user running baton, as an identity for records without `--as`.
pub(super) async fn person(scope: &Scope) -> Identity {
    let user = crate::settings::person(&crate::commands::project_dir()).await;
    Identity {
        profile: format!("person:{user}"),
        model: None,
        session: default_session(scope),
    }
}

fn default_session(scope: &Scope) -> String {
    match scope.kind {
        ScopeKind::Session => scope.key.clone(),
        _ => "cli".to_owned(),
    }
}

/// A run scope must name a recorded run (tasks and sessions need no
/// record); its key becomes the run's whole id (see `run_ref`).
pub(super) async fn run_exists(store: &baton_store::Store, scope: &mut Scope) -> Result<(), u8> {
    if scope.kind == ScopeKind::Run {
        scope.key = crate::commands::run_ref::resolve(store, &scope.key).await?;
    }
    Ok(())
}
