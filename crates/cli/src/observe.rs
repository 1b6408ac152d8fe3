//! Who listens to the engine's spans (one per run, stage and attempt):
//! nobody unless the environment asks, so a run pays nothing for them.
//!
//! `BATON_LOG` (`baton=info`, `baton::attempt=info,sqlx=warn`, …) prints
//! them to stderr as they open and close. Built with the `otel` feature,
//! baton also sends them to the OpenTelemetry collector that
//! `BATON_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) names.

use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

use crate::output;
use crate::settings::Observability;

#[cfg(feature = "otel")]
mod otel;

/// A layer of the one subscriber baton installs.
type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

/// What must happen before baton exits: the spans not yet sent are sent.
#[derive(Default)]
pub(crate) struct Listening {
    #[cfg(feature = "otel")]
    otel: Option<otel::Exporting>,
}

impl Listening {
    /// Sends the spans still waiting and warns if the collector did not
    /// take them all: a run's result never depends on its collector.
    pub(crate) fn finish(self) {
        #[cfg(feature = "otel")]
        if let Some(exporting) = self.otel {
            exporting.finish();
        }
    }
}

/// Installs the subscriber the environment asks for, if any.
pub(crate) fn install(wanted: Observability) -> Listening {
    let mut layers: Vec<Boxed> = Vec::new();
    if let Some(directives) = &wanted.log {
        match directives.parse::<Targets>() {
            Ok(targets) => layers.push(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
                    .with_filter(targets)
                    .boxed(),
            ),
            Err(error) => output::stderr_line(&format!(
                "baton: warning: BATON_LOG={directives} is not a list of TARGET=LEVEL ({error}); no spans are printed"
            )),
        }
    }
    let listening = otlp(wanted.otlp.as_ref(), &mut layers);
    if !layers.is_empty() {
        // Only fails when a subscriber is already set, which nothing else does.
        let _ = tracing::subscriber::set_global_default(Registry::default().with(layers));
    }
    listening
}

#[cfg(feature = "otel")]
fn otlp(wanted: Option<&crate::settings::Otlp>, layers: &mut Vec<Boxed>) -> Listening {
    let Some(wanted) = wanted else {
        return Listening::default();
    };
    match otel::start(wanted) {
        Ok((layer, exporting)) => {
            layers.push(layer);
            Listening {
                otel: Some(exporting),
            }
        }
        Err(why) => {
            output::stderr_line(&format!("baton: warning: no OpenTelemetry export: {why}"));
            Listening::default()
        }
    }
}

#[cfg(not(feature = "otel"))]
fn otlp(wanted: Option<&crate::settings::Otlp>, _: &mut Vec<Boxed>) -> Listening {
    // The standard variables may be meant for other programs; baton's own
    // is meant for baton, and a build that cannot honour it says so.
    if let Some(crate::settings::Otlp::Baton(_)) = wanted {
        output::stderr_line(&format!(
            "baton: warning: {} is set, but this baton was built without OpenTelemetry (cargo feature `otel`); no spans are sent",
            crate::settings::OTLP_ENDPOINT
        ));
    }
    Listening::default()
}
