//! OpenTelemetry export: the engine's spans, through
//! `tracing-opentelemetry`, to a collector over OTLP/HTTP (protobuf).
//!
//! The SDK's batch processor sends from a thread of its own, so a drive
//! never waits on the collector. A collector that is down or refuses the
//! spans costs a warning once the command is done, never the run.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use crate::output;
use crate::settings::Otlp;

/// How long one export may take; a collector that does not answer costs
/// a short command at most this much at its end.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The export under way, to finish before baton exits.
pub(super) struct Exporting {
    provider: SdkTracerProvider,
    failed: Failures,
    endpoint: String,
}

/// The first error an export met, if any.
type Failures = Arc<Mutex<Option<String>>>;

impl Exporting {
    /// Sends what is waiting, and warns once if any export failed.
    pub(super) fn finish(self) {
        let shutdown = self.provider.shutdown();
        let failed = self
            .failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .or_else(|| shutdown.err().map(|error| error.to_string()));
        if let Some(error) = failed {
            output::stderr_line(&format!(
                "baton: warning: spans were not all sent to {}: {error}",
                self.endpoint
            ));
        }
    }
}

/// Starts the export `wanted` names; the layer hands it baton's spans.
pub(super) fn start(
    wanted: &Otlp,
) -> Result<(Box<dyn Layer<Registry> + Send + Sync>, Exporting), String> {
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT);
    let endpoint = match wanted {
        Otlp::Baton(base) => {
            let url = format!("{}/v1/traces", base.trim_end_matches('/'));
            builder = builder.with_endpoint(&url);
            url
        }
        Otlp::Standard => "the OTEL_EXPORTER_OTLP_ENDPOINT collector".to_owned(),
    };
    let exporter = builder.build().map_err(|error| error.to_string())?;
    let failed = Failures::default();
    let noting = Noting {
        inner: exporter,
        failed: Arc::clone(&failed),
    };
    let provider = SdkTracerProvider::builder()
        .with_resource(Resource::builder().with_service_name("baton").build())
        .with_batch_exporter(noting)
        .build();
    let tracer = provider.tracer("baton");
    // Only baton's own spans: not those of the libraries it uses.
    let targets = Targets::new().with_target("baton", tracing::Level::INFO);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(targets)
        .boxed();
    Ok((
        layer,
        Exporting {
            provider,
            failed,
            endpoint,
        },
    ))
}

/// The OTLP exporter, noting the first export that failed, since the SDK
/// reports it only to its own internal log.
#[derive(Debug)]
struct Noting {
    inner: opentelemetry_otlp::SpanExporter,
    failed: Failures,
}

impl SpanExporter for Noting {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(error) = &result {
            self.failed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert_with(|| error.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
