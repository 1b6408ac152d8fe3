//! The store conformance suite: one set of tests, run on both backends.
//!
//! Each test is an async function taking a [`harness::Fresh`] database. The
//! `conformance!` list below turns every one into two tests,
//! `sqlite::<module>::<test>` (always, on a temporary file) and
//! `postgres::<module>::<test>` (on a database of its own, created through
//! the server `BATON_TEST_DATABASE_URL` names; `./scripts/test` starts one).
//! Without that variable the PostgreSQL tests fail, unless `BATON_TEST_SKIP`
//! lists `postgres` (`baton_test_support::needs`).

mod concurrency;
mod gates;
mod harness;
mod lease;
mod ledger;
mod prune;
mod queue;
mod runs;
mod schema;
mod tokens;
mod transitions;

/// Expands `module: [test, …]` lists into a `sqlite` and a `postgres` test
/// module with one `#[tokio::test]` per function.
macro_rules! conformance {
    ($($module:ident: [$($test:ident),* $(,)?]),* $(,)?) => {
        mod sqlite {
            $(mod $module {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $test() {
                        crate::harness::run(crate::harness::Backend::Sqlite, crate::$module::$test).await;
                    }
                )*
            })*
        }
        mod postgres {
            $(mod $module {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $test() {
                        crate::harness::run(crate::harness::Backend::Postgres, crate::$module::$test).await;
                    }
                )*
            })*
        }
    };
}

conformance! {
    schema: [
        migrations_are_idempotent,
        concurrent_opens_migrate_once,
        newer_schema_is_refused,
    ],
    runs: [
        create_run_and_read_it_back,
        runs_are_listed_oldest_first,
        child_runs_are_those_whose_options_name_a_parent,
        duplicate_run_id_is_refused,
        unknown_run_is_an_error,
    ],
    lease: [
        acquire_free_run,
        acquire_is_refused_while_held,
        acquire_after_expiry_bumps_epoch,
        take_over_bumps_epoch,
        stale_epoch_writes_nothing,
        renew_extends_the_lease,
        renew_after_takeover_is_lost,
        renew_sees_cancel_request,
        release_frees_the_lease,
        a_run_created_leased_is_held_at_epoch_one,
        the_last_commit_can_release_the_lease,
    ],
    transitions: [
        attempt_started,
        process_started,
        process_started_with_its_end,
        starts_and_ends_in_one_batch,
        a_large_batch_is_written_whole,
        units_start_and_end_in_one_batch,
        attempt_finished_success_records_artifacts,
        attempt_finished_failed,
        attempt_finished_replaces_artifacts,
        usage_recorded_per_attempt_and_unit,
        artifacts_recorded_replaces_one_stage_s_artifacts,
        attempt_interrupted,
        stage_reset,
        stage_skipped,
        run_status,
        event,
        batch_is_atomic,
        events_are_ordered,
        events_of_one_kind,
    ],
    concurrency: [
        concurrent_applies_serialize,
        concurrent_acquirers_one_wins,
        concurrent_take_overs_have_one_winner,
        concurrent_creates_one_wins,
    ],
    gates: [
        decision_is_recorded,
        second_decision_gets_the_winner,
        new_attempt_or_artifact_is_decided_again,
        decision_on_unknown_run_is_an_error,
        replace_artifact_is_a_compare_and_swap,
        concurrent_edits_one_wins,
        concurrent_decisions_record_exactly_one,
        rejected_run_is_terminal,
        a_decision_keeps_the_outputs_it_was_made_on,
    ],
    ledger: [
        appends_are_numbered_per_scope,
        expected_append_refuses_when_the_scope_moved,
        concurrent_appends_never_collide,
        ledger_events_ride_in_a_fenced_batch,
    ],
    prune: [
        tallies_count_stages_by_status_and_sum_costs,
        only_a_finished_run_no_driver_holds_is_deleted_whole,
    ],
    tokens: [
        a_token_is_found_by_its_hash_until_revoked,
        a_name_has_one_token,
        concurrent_creations_of_one_name_record_one,
    ],
    queue: [
        enqueue_is_idempotent,
        a_claim_by_key_prefix_takes_only_those_jobs,
        claims_are_exclusive_under_concurrency,
        stale_epoch_completion_is_rejected,
        heartbeat_extends_and_reports_lost_leases,
        reaper_counts_attempts_and_poison_ends_in_error,
        reaper_skips_jobs_another_transaction_holds,
        failures_retry_with_backoff_until_max_attempts,
        terminal_and_deferred_outcomes,
        release_does_not_count_an_attempt,
        priorities_and_not_before,
        purge_removes_old_finished_jobs,
        jobs_page_by_id_with_filters,
        jobs_are_counted_by_queue_and_status,
    ],
}
