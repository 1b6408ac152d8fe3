//! A run's lease (who drives it, fenced by an epoch) and its cancel request.

use crate::events::lease_acquired;
use crate::model::{Lease, LeaseHolder};
use crate::{Error, Result, Store};

/// Gives a lease up, if it is still the one recorded.
pub(crate) const RELEASE: &str =
    "UPDATE runs SET lease_owner = NULL, lease_until = 0 WHERE run_id = $1 AND lease_epoch = $2";

impl Store {
    /// Who holds the run's lease, if anyone does and it has not expired.
    ///
    /// # Errors
    ///
    /// No such run, or the read fails.
    pub async fn lease_holder(&self, run_id: &str, now: i64) -> Result<Option<LeaseHolder>> {
        let run = self.run(run_id).await?;
        Ok(run
            .lease_owner
            .filter(|_| run.lease_until > now)
            .map(|owner| LeaseHolder {
                owner,
                until: run.lease_until,
            }))
    }

    /// Takes the run's lease: possible when nobody holds it, it expired, or
    /// the current holder is `take_over_from`, a holder the caller proved
    /// dead. Naming the dead holder matters: of two processes that both saw
    /// it dead, the second finds the first holding the lease and is refused,
    /// instead of taking it from a live driver. The epoch goes up by one,
    /// fencing out the previous holder.
    ///
    /// # Errors
    ///
    /// [`Error::Held`] while a live holder's lease runs; [`Error::NoSuchRun`].
    pub async fn acquire(
        &self,
        run_id: &str,
        owner: &str,
        now: i64,
        ttl_ms: i64,
        take_over_from: Option<&str>,
    ) -> Result<Lease> {
        let mut tx = self.begin().await?;
        // Lock the run before reading its lease, as `apply` does: a
        // concurrent acquirer (PostgreSQL, READ COMMITTED) waits here and
        // then reads the winner's lease instead of the stale one. SQLite
        // already holds the write lock.
        let lock = "UPDATE runs SET lease_epoch = lease_epoch WHERE run_id = $1";
        if tx.execute(lock, &[run_id.into()], "lock the run").await? == 0 {
            return Err(Error::NoSuchRun(run_id.to_owned()));
        }
        let read = "SELECT lease_owner, lease_epoch, lease_until FROM runs WHERE run_id = $1";
        let (holder, epoch, until): (Option<String>, i64, i64) = tx
            .fetch_one(read, &[run_id.into()], "read the lease")
            .await?;
        if let Some(holder) = holder
            && until > now
            && take_over_from != Some(holder.as_str())
            && holder != owner
        {
            return Err(Error::Held {
                run_id: run_id.to_owned(),
                owner: holder,
                until,
            });
        }
        let lease = Lease {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            epoch: epoch + 1,
            until: now + ttl_ms,
        };
        let take = "UPDATE runs SET lease_owner = $1, lease_epoch = $2, lease_until = $3 \
                    WHERE run_id = $4 AND lease_epoch = $5";
        let args = [
            owner.into(),
            lease.epoch.into(),
            lease.until.into(),
            run_id.into(),
            epoch.into(),
        ];
        // Cannot fail while the row is locked; checked so that no change
        // can ever hand out a lease the database does not record.
        if tx.execute(take, &args, "take the lease").await? != 1 {
            return Err(Error::LostLease {
                run_id: run_id.to_owned(),
                epoch: lease.epoch,
            });
        }
        let log =
            "INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, 'lease_acquired', $3)";
        let detail = lease_acquired(owner, lease.epoch);
        let args = [run_id.into(), now.into(), (&detail).into()];
        tx.execute(log, &args, "log the lease").await?;
        tx.commit().await?;
        Ok(lease)
    }

    /// Extends the lease; returns whether a cancel was requested.
    ///
    /// # Errors
    ///
    /// [`Error::LostLease`] when another process took the run over.
    pub async fn renew(&self, lease: &mut Lease, now: i64, ttl_ms: i64) -> Result<bool> {
        let until = now + ttl_ms;
        let mut tx = self.begin().await?;
        let sql = "UPDATE runs SET lease_until = $1 WHERE run_id = $2 AND lease_epoch = $3 \
                   RETURNING cancel_requested";
        let args = [until.into(), (&lease.run_id).into(), lease.epoch.into()];
        let cancel: i64 = tx
            .fetch_optional(sql, &args, "renew the lease")
            .await?
            .ok_or_else(|| Error::LostLease {
                run_id: lease.run_id.clone(),
                epoch: lease.epoch,
            })?;
        tx.commit().await?;
        lease.until = until;
        Ok(cancel != 0)
    }

    /// Gives the lease up.
    ///
    /// # Errors
    ///
    /// The write fails (a lost lease is not an error here).
    pub async fn release(&self, lease: &Lease) -> Result<()> {
        let args = [(&lease.run_id).into(), lease.epoch.into()];
        self.write(RELEASE, &args, "release the lease").await?;
        Ok(())
    }

    /// Whether someone asked to cancel the run (a cheap read the driver
    /// makes often, so a cancel takes effect within a fraction of a second).
    ///
    /// # Errors
    ///
    /// [`Error::Gone`] when the read failed on a SQLite file deleted or
    /// replaced since it was opened; else the read fails.
    pub async fn cancel_requested(&self, run_id: &str) -> Result<bool> {
        let sql = "SELECT cancel_requested FROM runs WHERE run_id = $1";
        let args = [run_id.into()];
        let requested = self.fetch_optional::<i64>(sql, &args, "read the cancel request");
        match requested.await {
            Ok(requested) => Ok(requested.unwrap_or(0) != 0),
            // A read connection opens the path when it is first needed: in
            // a file put in the store's place, the table is missing. That
            // is the file having gone, not a failed query.
            Err(error) => {
                self.still_there()?;
                Err(error)
            }
        }
    }

    /// Forgets the cancel a run ended with, so that it can be driven
    /// again (`baton resume` of a cancelled run).
    ///
    /// # Errors
    ///
    /// The write fails.
    pub async fn clear_cancel(&self, run_id: &str) -> Result<()> {
        let sql = "UPDATE runs SET cancel_requested = 0 WHERE run_id = $1";
        self.write(sql, &[run_id.into()], "clear the cancel request")
            .await?;
        Ok(())
    }

    /// Asks whoever drives the run to cancel it.
    ///
    /// # Errors
    ///
    /// No such run, or the write fails.
    pub async fn request_cancel(&self, run_id: &str, now: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        let sql = "UPDATE runs SET cancel_requested = 1 WHERE run_id = $1";
        if tx
            .execute(sql, &[run_id.into()], "request a cancel")
            .await?
            == 0
        {
            return Err(Error::NoSuchRun(run_id.to_owned()));
        }
        let log = "INSERT INTO events (run_id, at, kind, detail) VALUES ($1, $2, 'cancel_requested', '{}')";
        tx.execute(log, &[run_id.into(), now.into()], "log the cancel")
            .await?;
        tx.commit().await
    }
}
